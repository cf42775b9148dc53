"""The repetition-loop test's sizes, in one place for generation (`kernelwright.generation`) and for the configs
whose help texts state them (evaluate, serve, rl); no torch here, so a config can import it."""

LOOP_WINDOW = 256  # tokens: a loop is caught once this many in a row repeat one unit
LOOP_MAX_PERIOD = 64  # tokens: the longest repeating unit looked for (two or three lines of code)
LOOP_TEST = f"its last {LOOP_WINDOW} tokens repeat one unit of at most {LOOP_MAX_PERIOD} tokens"
