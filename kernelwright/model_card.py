"""The card a training stage leaves in its output folder (`README.md`), in place of TRL's hub draft.

TRL's trainers write a Hugging Face Hub model card into the output folder at every checkpoint (a
"fine-tuned version of [None]" with a chat quick start pointing at the hub). A kernelwright output
folder holds a local model whose parameters, metrics and registered version are in MLflow, so its
card says which command made it, where its run is, and how to use what the folder holds:

    class CusetSFTTrainer(SFTTrainer):
        def create_model_card(self, *args, **kwargs) -> None:
            write_model_card(self, "train")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from kernelwright import atomic

CARD_FILE = "README.md"


def model_card(stage: str, run_id: str | None, step: int, folder: str) -> str:
    """The card's text: the command `kernelwright <stage>` made this folder, `run_id` its MLflow run (None:
    not tracked), `step` the last step saved when it was written."""
    run = (f"Its MLflow run is `{run_id}` (experiment `kernelwright`): the parameters it ran with, the\n"
           "per-step metrics and, once it ends, the registered model version."
           if run_id else "It ran without an MLflow run, so nothing but this folder records it.")
    return f"""# kernelwright {stage}: {Path(folder).name}

Made by `kernelwright {stage}`; the last step saved when this card was written: {step}.
{run}

- `checkpoint-<step>/`: the trainer's checkpoints; the same command with the same output folder
  resumes from the newest complete one.
- `final/`: the model once the run has ended (a Hugging Face folder, tokenizer beside it):

      kernelwright evaluate --model {folder}/final
      kernelwright serve --model {folder}/final
"""


def write_model_card(trainer: Any, stage: str) -> None:
    """Write the card into `trainer`'s output folder (the main process only), as TRL's
    `create_model_card` would write its own."""
    if not trainer.is_world_process_zero():
        return
    active = mlflow.active_run()
    folder = str(trainer.args.output_dir)
    text = model_card(stage, active.info.run_id if active else None, int(trainer.state.global_step), folder)
    atomic.write_text(Path(folder) / CARD_FILE, text)
