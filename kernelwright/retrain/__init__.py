"""The retraining job: curate -> train -> evaluate -> gate, unattended, idempotent and crash-safe.

`job` runs it (`kernelwright retrain`), `watermark` decides whether there is anything new to learn,
`champion` evaluates both sides and moves the registry aliases, `lock` keeps two runs apart,
`schedule` runs it on a cron schedule (`kernelwright schedule`).
"""
