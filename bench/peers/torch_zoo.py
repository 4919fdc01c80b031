"""Tandem's zoo models (src/nn/zoo.cpp) in PyTorch, layer for layer: the same layers, widths,
depths, strides, batch-normalisation settings (PyTorch's momentum 0.1 is Keras' 0.9) and
weight shapes, so the parameter count equals Tandem's Model::count_params() when the batch
normalisation's running statistics are counted with the parameters, as Keras and Tandem do.
Models take NCHW images (PyTorch's convention); the convolutional ones are trained in the
channels-last memory format, which is Tandem's and TensorFlow's NHWC layout and the format
PyTorch's oneDNN and cuDNN convolutions are fastest in. Under bf16 autocast the logits layer
runs in float32, as Tandem's zoo does.

Parameter counts are listed in tf_zoo.py (the same for both peers; tests/bench/peers_parity.cpp
checks them against Tandem's).

Imported only after common.limit_threads_env: OpenMP and MKL read the variables when torch
loads them.
"""

import torch
from torch import nn


class Logits(nn.Linear):
    """Tandem's zoo logits: float32 even under autocast, so the softmax and the loss see
    full-precision logits."""

    def forward(self, x):
        with torch.autocast(device_type=x.device.type, enabled=False):
            return super().forward(x.float())


def mlp(input_shape, num_classes):
    height, width, channels = input_shape
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(height * width * channels, 128),
        nn.ReLU(),
        Logits(128, num_classes),
    )


def cnn(input_shape, num_classes):
    """The TensorFlow CNN tutorial, as Tandem's "cnn" and main job."""
    height, width, channels = input_shape

    def after_convolutions(side):  # two valid 3x3 convolutions, each followed by 2x2 pooling
        return ((side - 2) // 2 - 2) // 2

    return nn.Sequential(
        nn.Conv2d(channels, 32, 3),  # (B, 32, 26, 26) at the default 28x28x1
        nn.ReLU(),
        nn.MaxPool2d(2),  # (B, 32, 13, 13)
        nn.Conv2d(32, 64, 3),  # (B, 64, 11, 11)
        nn.ReLU(),
        nn.MaxPool2d(2),  # (B, 64, 5, 5)
        nn.Flatten(),  # (B, 1600)
        nn.Linear(64 * after_convolutions(height) * after_convolutions(width), 64),
        nn.ReLU(),
        Logits(64, num_classes),
    )


def conv_for_batch_norm(in_channels, filters, kernel_size, stride):
    """A bias-free convolution with Keras' "same" output size (ceil(side / stride)), for odd
    kernels; the BatchNormalization after it supplies the offset."""
    return nn.Conv2d(
        in_channels, filters, kernel_size, stride=stride, padding=kernel_size // 2, bias=False
    )


def batch_norm(channels):
    """ResNet-50's batch normalisation: Keras' momentum 0.9 is PyTorch's 0.1."""
    return nn.BatchNorm2d(channels, eps=1e-5, momentum=0.1)


class Bottleneck(nn.Module):
    """The v1.5 bottleneck: 1x1 reduce, 3x3 carrying the stride, 1x1 expand to 4 x filters; the
    shortcut projected (1x1, strided) when the shape changes."""

    def __init__(self, in_channels, filters, stride):
        super().__init__()
        self.residual = nn.Sequential(
            conv_for_batch_norm(in_channels, filters, 1, 1),
            batch_norm(filters),
            nn.ReLU(),
            conv_for_batch_norm(filters, filters, 3, stride),
            batch_norm(filters),
            nn.ReLU(),
            conv_for_batch_norm(filters, 4 * filters, 1, 1),
            batch_norm(4 * filters),
        )
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != 4 * filters:
            self.shortcut = nn.Sequential(
                conv_for_batch_norm(in_channels, 4 * filters, 1, stride), batch_norm(4 * filters)
            )

    def forward(self, x):
        return torch.relu(self.residual(x) + self.shortcut(x))


def resnet50(input_shape, num_classes):
    """ResNet-50 v1.5 (the same network as torchvision's resnet50)."""
    channels = input_shape[2]
    stages = [
        conv_for_batch_norm(channels, 64, 7, 2),  # (B, 64, 112, 112) at 224x224
        batch_norm(64),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, padding=1),  # (B, 64, 56, 56)
    ]
    in_channels = 64
    for stage, (filters, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            stages.append(Bottleneck(in_channels, filters, 2 if stage > 0 and block == 0 else 1))
            in_channels = 4 * filters
    stages += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), Logits(in_channels, num_classes)]
    return nn.Sequential(*stages)


class PositionEmbedding(nn.Module):
    """Learned positions (keras_nlp's PositionEmbedding, as Tandem's): the first `length` rows of
    a trainable (sequence_length, features) table, broadcast to the input's shape."""

    def __init__(self, sequence_length, features):
        super().__init__()
        self.table = nn.Parameter(nn.init.xavier_uniform_(torch.empty(sequence_length, features)))

    def forward(self, x):  # x (B, S, D)
        return self.table[: x.shape[1]].expand_as(x)  # (B, S, D)


class EncoderBlock(nn.Module):
    """One post-layer-norm block: attention and feed-forward sublayers, each added to its input
    and normalised (nn.TransformerEncoderLayer would add a dropout between the feed-forward
    layers that Tandem's block does not have)."""

    def __init__(self, config):
        super().__init__()
        hidden, dropout = config["hidden_size"], config["dropout"]
        epsilon = config["layer_norm_epsilon"]
        self.attention = nn.MultiheadAttention(
            hidden, config["heads"], dropout=dropout, batch_first=True
        )
        self.attention_dropout = nn.Dropout(dropout)
        self.attention_norm = nn.LayerNorm(hidden, eps=epsilon)
        self.feed_forward = nn.Sequential(
            nn.Linear(hidden, config["intermediate_size"]),
            nn.GELU(),
            nn.Linear(config["intermediate_size"], hidden),
            nn.Dropout(dropout),
        )
        self.feed_forward_norm = nn.LayerNorm(hidden, eps=epsilon)

    def forward(self, x):  # x (B, S, D)
        attention, _ = self.attention(x, x, x, need_weights=False)
        y = self.attention_norm(x + self.attention_dropout(attention))
        return self.feed_forward_norm(y + self.feed_forward(y))


class Transformer(nn.Module):
    """Tandem's zoo::transformer_encoder (config: the fields of TransformerEncoderConfig)."""

    def __init__(self, num_classes, config):
        super().__init__()
        hidden = config["hidden_size"]
        self.tokens = nn.Embedding(config["vocabulary_size"], hidden)
        self.positions = PositionEmbedding(config["max_sequence_length"], hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=config["layer_norm_epsilon"])
        self.embedding_dropout = nn.Dropout(config["dropout"])
        self.blocks = nn.Sequential(*[EncoderBlock(config) for _ in range(config["layers"])])
        self.logits = Logits(hidden, num_classes)

    def forward(self, token_ids):  # (B, S) i64
        tokens = self.tokens(token_ids)  # (B, S, D)
        x = self.embedding_dropout(self.embedding_norm(tokens + self.positions(tokens)))
        return self.logits(self.blocks(x).mean(dim=1))  # (B, classes)


def build(workload):
    """The PyTorch model of a run_peer.Workload."""
    if workload.model == "transformer":
        return Transformer(workload.classes, workload.transformer)
    builders = {"mlp": mlp, "cnn": cnn, "resnet50": resnet50}
    return builders[workload.model](workload.input_shape, workload.classes)


def count_weights(model):
    """(all, trainable): all counts the floating-point buffers too (batch normalisation's running
    mean and variance), as Keras' count_params() and Tandem's do."""
    trainable = sum(parameter.numel() for parameter in model.parameters())
    statistics = sum(buffer.numel() for buffer in model.buffers() if buffer.is_floating_point())
    return trainable + statistics, trainable


def train_step_timer(workload, threads, device, precision, seed):
    """Builds the model, its Adam optimizer and one synthetic batch on `device`; returns
    (version, parameters, trainable_parameters, step) where step() runs one training step and
    returns its loss as a float, which waits for the step to finish."""
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(seed)
    target = torch.device(device)
    if target.type == "cuda":
        # Tandem's fp32 on a GPU uses TF32 tensor cores, and picks convolution algorithms by search.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    convolutional = workload.model in ("cnn", "resnet50")
    memory_format = torch.channels_last if convolutional else torch.contiguous_format
    model = build(workload).to(device=target, memory_format=memory_format)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=workload.learning_rate)
    loss_fn = nn.CrossEntropyLoss()

    features, labels = workload.synthetic_batch()
    x = torch.from_numpy(features)
    if convolutional:
        x = x.permute(0, 3, 1, 2)  # (B, C, H, W), NHWC in memory
    x = x.to(device=target, memory_format=memory_format)
    if workload.model == "transformer":
        x = x.long()  # (B, S) token ids
    y = torch.from_numpy(labels).long().to(target)  # (B,)
    autocast = torch.autocast(target.type, dtype=torch.bfloat16, enabled=precision == "bf16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    parameters, trainable = count_weights(model)
    return torch.__version__, parameters, trainable, step


def unsupported(device, precision):
    """Why this PyTorch cannot run the combination, or None."""
    if device == "cuda":
        if not torch.cuda.is_available():
            return f"PyTorch {torch.__version__} sees no GPU"
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            return f"the GPU {torch.cuda.get_device_name(0)} has no bfloat16 support"
    return None
