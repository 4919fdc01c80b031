"""The example notebook runs, every cell, on a real Jupyter kernel (nbclient + ipykernel)."""

import pathlib
import shutil

import nbformat
from nbclient import NotebookClient

import tandem

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples/notebooks/tandem_workflow.ipynb"


def test_the_workflow_notebook_runs_without_a_cell_error(tmp_path, monkeypatch):
    # The kernel imports the package this test imports, wherever the test runs from.
    monkeypatch.setenv("PYTHONPATH", str(pathlib.Path(tandem.__file__).resolve().parents[1]))
    # Run in a scratch folder: the notebook writes logs/ and fashion_cnn.keras where it runs.
    shutil.copy(NOTEBOOK, tmp_path)
    notebook = nbformat.read(tmp_path / NOTEBOOK.name, as_version=4)
    NotebookClient(
        notebook,
        timeout=1200,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()  # raises CellExecutionError naming the cell and its traceback
    outputs = [
        output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    ]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "replicas:" in text and "test accuracy" in text
    assert "Epoch 2/2" in text, "fit's progress bar reached the cell's output"
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 2, "the speed chart and the learning-rate A/B plot"
    assert list((tmp_path / "logs" / "baseline" / "train").glob("events.out.tfevents.*"))
