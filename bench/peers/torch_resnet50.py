"""The PyTorch side of the GPU benchmark in scripts/gpu-check.sh: torchvision's ResNet-50 (v1.5,
like Tandem's zoo model) trained on one batch of synthetic 224x224 data kept on the GPU, the way
NVIDIA's and PyTorch's own ResNet benchmarks do it: channels-last memory format, SGD with
momentum, eager mode; fp32 (with TF32 tensor cores allowed for convolutions and matmuls, as
Tandem's fp32 does by default) or bf16 through torch.autocast (PyTorch's AMP; bf16 needs no
gradient scaler). Timed the same way as bench/zoo_throughput.cpp: warm-up steps, then windows of
steps each ended by reading the loss back; the median window's rate. Prints one JSON line.

    python3 bench/peers/torch_resnet50.py --precision bf16 --batch-size 256
"""

import argparse
import json
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args()

    import torch
    import torchvision

    if not torch.cuda.is_available():
        raise SystemExit("torch_resnet50.py: PyTorch sees no GPU")
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True  # cuDNN's algorithm search, as Tandem does
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(1)

    model = torchvision.models.resnet50(num_classes=args.classes)
    model = model.to(device=device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.rand(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, args.classes, (args.batch_size,), device=device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    model.train()
    for _ in range(args.warmup):
        loss = step()
    loss.item()
    rates = []
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        final = loss.item()
        seconds = time.perf_counter() - start
        if final != final:
            raise SystemExit("torch_resnet50.py: the loss diverged")
        rates.append(args.steps * args.batch_size / seconds)
    print(json.dumps({
        "framework": "pytorch",
        "version": torch.__version__,
        "model": "resnet50",
        "precision": args.precision,
        "device": torch.cuda.get_device_name(0),
        "batch_size": args.batch_size,
        "samples_per_sec": round(statistics.median(rates), 2),
        "min_samples_per_sec": round(min(rates), 2),
        "max_samples_per_sec": round(max(rates), 2),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
    }))


if __name__ == "__main__":
    main()
