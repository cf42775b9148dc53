"""A retrain that SIGKILLs its own process right after training saved checkpoint-2: a kill mid-training.

    python -m tests.retrain._killed_retrain CONFIG.json    # RetrainConfig fields as JSON
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kernelwright.retrain.config import RetrainConfig
from kernelwright.retrain.job import run_retrain
from kernelwright.training import stage

KILL_AT_STEP = 2


class KillAfterSave(TrainerCallback):
    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == KILL_AT_STEP:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    build = stage.build_trainer

    def build_and_arm(*args: Any, **kwargs: Any) -> Any:
        trainer = build(*args, **kwargs)
        trainer.add_callback(KillAfterSave())
        return trainer

    stage.build_trainer = build_and_arm  # type: ignore[assignment]
    run_retrain(RetrainConfig(**json.loads(Path(sys.argv[1]).read_text())))


if __name__ == "__main__":
    main()
