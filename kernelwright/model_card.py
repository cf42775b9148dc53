"""The card a training stage leaves in its output folder (`README.md`), in place of TRL's hub draft.

TRL's trainers write a Hugging Face Hub model card into the output folder at every checkpoint (a
"fine-tuned version of [None]" with a chat quick start pointing at the hub). A kernelwright output
folder holds a local model whose parameters, metrics and registered version are in MLflow, so its
card says which command made it, where its run is, and how to use what the folder holds:

    class CusetSFTTrainer(SFTTrainer):
        def create_model_card(self, *args, **kwargs) -> None:
            write_model_card(self, "train")

A registered version carries a card too (`registry_card`): `log_local_model` gives it to MLflow, which
would otherwise look the model's name up on the Hugging Face Hub for one.
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


def registry_card(stage: str) -> Any:
    """The card a registered version carries in MLflow (a `huggingface_hub.ModelCard`): which command made it and
    where its record is; given to MLflow so that it asks no hub for one."""
    from huggingface_hub import ModelCard

    return ModelCard(f"""---
license: other
---
# kernelwright {stage}

A model made by `kernelwright {stage}` on this machine, not a Hugging Face Hub model. The MLflow run it
was logged in holds what made it: the command's settings, the data's digests, the per-step metrics and,
for a trained version, the base it started from.
""")


def _local_name(name_or_path: str) -> str:
    """A model folder of this machine by its absolute path; anything else as it is. MLflow looks a model's name up
    on the Hugging Face Hub for its card and licence, and a relative folder (`W/base`) reads as a hub repository
    id: offline that is five retries (~25 s) per registration, where an absolute path fails at once, locally."""
    return str(Path(name_or_path).resolve()) if name_or_path and Path(name_or_path).exists() else name_or_path


def log_local_model(components: dict[str, Any], stage: str, *, registered_model_name: str | None,
                    pip_requirements: list[str], base_model_path: str | None = None) -> Any:
    """`mlflow.transformers.log_model` (artifact `model`, task text-generation) of {"model", "tokenizer"} built on
    this machine: its card is kernelwright's (`stage` made it), never fetched from the hub, and the model is named
    by its local path. The model info MLflow returns."""
    model = components["model"]
    model.name_or_path = _local_name(str(getattr(model, "name_or_path", "") or ""))
    return mlflow.transformers.log_model(  # type: ignore[attr-defined]
        transformers_model=components, name="model", task="text-generation",
        registered_model_name=registered_model_name, base_model_path=base_model_path,
        pip_requirements=pip_requirements, model_card=registry_card(stage))
