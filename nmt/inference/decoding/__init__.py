"""The search, which knows no feature of a text: one batched loop over any policy (greedy, beam,
sampling), the rules every search keeps as one mask a step, and the hooks through which a caller's
rules (the glossary's steering) add to a step. It imports nothing from the text stages or the terms."""
