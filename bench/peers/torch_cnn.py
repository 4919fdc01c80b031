"""Tandem's main job in PyTorch, trained the way a PyTorch user does: NCHW tensors (PyTorch's
default layout; channels_last is an opt-in most training scripts do not use), a shuffled
DataLoader over an in-memory TensorDataset, and the usual zero_grad / backward / step loop.

    .venv/bin/python bench/peers/torch_cnn.py --epochs 1 --batch-size 32 --threads 2
"""

import sys
import time

import common


def to_nchw(torch, images):
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()  # (N, 1, 28, 28)


def main():
    args = common.parse_args("PyTorch")
    common.limit_threads_env(args.threads)
    # After limit_threads_env: OpenMP and MKL read the variables when torch loads them.
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    import torch_zoo

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)

    train_images, train_labels = common.load_fashion_mnist(args.data_dir, "train")
    loader = DataLoader(
        TensorDataset(to_nchw(torch, train_images), torch.from_numpy(train_labels)),
        batch_size=args.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed),
    )
    model = torch_zoo.cnn(input_shape=(28, 28, 1), num_classes=10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    # torch.compile traces and generates C++ on the first call (inside the warm-up steps).
    train_model = torch.compile(model) if args.compile else model

    clock = common.StepClock(args.warmup_steps)
    epoch_seconds = []
    for epoch in range(args.epochs):
        epoch_started = time.perf_counter()
        clock.start_epoch()
        model.train()
        loss_sum, correct = 0.0, 0
        for images, labels in loader:  # (B, 1, 28, 28) f32, (B,) i64
            optimizer.zero_grad(set_to_none=True)
            logits = train_model(images)  # (B, 10)
            loss = loss_fn(logits, labels)
            loss.backward()
            optimizer.step()
            # The running loss and accuracy a training loop reports, as Keras' fit() does.
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(dim=1) == labels).sum().item()
            clock.step_done(len(labels))
        epoch_seconds.append(time.perf_counter() - epoch_started)
        examples = len(loader.dataset)
        print(
            f"epoch {epoch + 1}: loss {loss_sum / examples:.4f}, accuracy {correct / examples:.4f}",
            file=sys.stderr,
        )

    test_accuracy = None
    if not args.no_evaluate:
        test_images, test_labels = common.load_fashion_mnist(args.data_dir, "t10k")
        model.eval()
        with torch.no_grad():
            logits = model(to_nchw(torch, test_images))  # (10000, 10)
        test_accuracy = (logits.argmax(dim=1).numpy() == test_labels).mean()
    common.emit(
        args,
        framework="pytorch-compile" if args.compile else "pytorch",
        version=torch.__version__,
        clock=clock,
        epoch_seconds=epoch_seconds,
        test_accuracy=test_accuracy,
        layout="NCHW",
    )


if __name__ == "__main__":
    main()
