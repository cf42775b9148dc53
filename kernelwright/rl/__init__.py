"""Reinforcement learning with the judge as the reward: `kernelwright rl` (GRPO through TRL).

- config.py: `RLConfig`, one field per setting;
- reward.py: the reward of a verdict, part by part (a cheat never earns a positive one);
- curriculum.py: phase 1 infill tasks, phase 2 whole problems, never a held-out item;
- judging.py: the judges (the GPU judge, or static checks and NVRTC without a GPU);
- judge_reward.py: the reward function GRPO calls, with its per-step metrics and samples table;
- resume.py: checkpoints and the MLflow run a killed run resumes into;
- stage.py: `run_rl`, `rl_command`: the trainer, the final model, its registration.
"""
