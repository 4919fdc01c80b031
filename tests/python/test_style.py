"""The package's Python is PEP 8 as ruff checks it (pyproject.toml), and formatted by ruff."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUFF = [sys.executable, "-m", "ruff"]


def test_ruff_finds_nothing_to_report():
    result = subprocess.run(
        [*RUFF, "check", "python", "tests/python", "examples/python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_files_are_formatted():
    result = subprocess.run(
        [*RUFF, "format", "--check", "python", "tests/python", "examples/python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
