"""Library chatter goes to the run's library.log; the terminal keeps HELIX's own lines."""

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.env import child_env

ROOT = Path(__file__).resolve().parents[2]


def test_library_warnings_and_vllm_logs_go_to_the_file_and_not_the_terminal(tmp_path):
    log = tmp_path / "library.log"
    script = textwrap.dedent(f"""
        import logging, threading, warnings
        from pathlib import Path
        from train.learner import console
        console.library_loggers_to(Path({str(log)!r}))
        warnings.warn("a library's UserWarning 7.25", UserWarning)
        t = threading.Thread(target=lambda: warnings.warn("from a writer thread 3.5", UserWarning))
        t.start(); t.join()
        logging.getLogger("vllm.engine").warning("vLLM says 2.6359830849")
        print("helix: own line")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    for said in ("a library's UserWarning 7.25", "from a writer thread 3.5", "vLLM says 2.6359830849"):
        assert said in text
        assert said not in done.stdout + done.stderr
    assert "[py.warnings]" in text and "[vllm.engine]" in text
    assert done.stdout == "helix: own line\n"


def test_single_process_checkpoint_warning_is_silenced_even_from_the_async_writer_thread(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from train.learner.backend_torch import LocalBackend
        model = torch.nn.Linear(3, 2)
        backend = LocalBackend.__new__(LocalBackend)
        backend.module, backend.optimizer = model, torch.optim.AdamW(model.parameters())
        future = backend.save_async({str(tmp_path)!r})
        future.result()
        print("saved")
        # DCP's writer thread warns whenever it gets to it, possibly after save_async has returned:
        # the same warning from another thread, after the save, must stay silent too
        import threading, warnings
        message = "torch.distributed is disabled, unavailable or uninitialized, assuming the intent is to save"
        t = threading.Thread(target=lambda: warnings.warn(message, UserWarning))
        t.start(); t.join()
        warnings.warn("an unrelated warning 0.125", UserWarning)
    """)
    done = subprocess.run([sys.executable, "-W", "default", "-c", script], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "saved" in done.stdout
    assert "torch.distributed is disabled" not in done.stderr
    assert "an unrelated warning 0.125" in done.stderr  # the filter is that one message, not every warning
    assert (tmp_path / "dcp" / ".metadata").is_file()
