"""Loads a log folder with TensorBoard's own event processing and prints what it found as JSON.

Used by tests/observe/tensorboard_interop_test.cpp: the runs are discovered and read by
TensorBoard's EventMultiplexer (what `tensorboard --logdir` serves from), every value migrated to
its plugin's form (scalars, histograms, images, text), and the HParams table listed by the
hparams plugin's own backend. The C++ test compares the output with what it wrote.

    python tensorboard_interop.py LOGDIR
"""

import base64
import json
import sys

from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups
from tensorboard.util import tensor_util


def read_run(multiplexer, run):
    """Every tag of `run`, grouped by the plugin TensorBoard assigns it to."""
    found = {"scalars": {}, "histograms": {}, "images": {}, "text": {}}
    for tag in multiplexer.GetAccumulator(run).Tags()["tensors"]:
        plugin = multiplexer.SummaryMetadata(run, tag).plugin_data.plugin_name
        events = multiplexer.Tensors(run, tag)
        if plugin == "scalars":
            found["scalars"][tag] = [
                [e.step, float(tensor_util.make_ndarray(e.tensor_proto)), e.wall_time]
                for e in events
            ]
        elif plugin == "histograms":
            found["histograms"][tag] = [
                [e.step, tensor_util.make_ndarray(e.tensor_proto).tolist()] for e in events
            ]
        elif plugin == "images":
            found["images"][tag] = []
            for e in events:
                width, height, *pngs = tensor_util.make_ndarray(e.tensor_proto).tolist()
                found["images"][tag].append(
                    [e.step, int(width), int(height)]
                    + [base64.b64encode(png).decode("ascii") for png in pngs]
                )
        elif plugin == "text":
            found["text"][tag] = [
                [e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode("utf-8")]
                for e in events
            ]
    return found


def read_session_groups(multiplexer, logdir):
    """The rows of TensorBoard's HParams table, as the hparams plugin's backend lists them: one
    per session (a run with a session_start_info record), with its hyper-parameters, the last
    value of every scalar of its runs as metrics, and the sessions' end statuses."""
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    tb_context = base_plugin.TBContext(
        logdir=logdir, multiplexer=multiplexer, data_provider=provider
    )
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=100)
    request.allowed_statuses.extend(
        [
            api_pb2.STATUS_UNKNOWN,
            api_pb2.STATUS_SUCCESS,
            api_pb2.STATUS_FAILURE,
            api_pb2.STATUS_RUNNING,
        ]
    )
    response = list_session_groups.Handler(
        context.RequestContext(), backend_context.Context(tb_context), "", request
    ).run()
    groups = {}
    for group in response.session_groups:
        groups[group.name] = {
            "hparams": {
                name: getattr(value, value.WhichOneof("kind"))
                for name, value in group.hparams.items()
            },
            "metrics": {
                f"{metric.name.group}/{metric.name.tag}": metric.value
                for metric in group.metric_values
            },
            "statuses": [session.status for session in group.sessions],
        }
    return groups


def main():
    logdir = sys.argv[1]
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    result = {
        "runs": {run: read_run(multiplexer, run) for run in sorted(multiplexer.Runs())},
        "session_groups": read_session_groups(multiplexer, logdir),
    }
    json.dump(result, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
