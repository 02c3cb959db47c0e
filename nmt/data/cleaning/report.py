"""What cleaning dropped, said where the user looks: one log line a rule (pairs, share of the
training pairs), every dropped pair with its rule in the prepared folder's `dropped.tsv`
(`rule<TAB>corpus line<TAB>source<TAB>target`) for the user to read a sample of, a loud warning where
one rule takes more than `LOUD_SHARE`, and an error where all of them together take more than
`data.drop_max_share`: a corpus mostly noise, or a rule wrong for it, is not trained on quietly."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.cleaning.rules import RULES
from nmt.errors import DataError

logger = logging.getLogger(__name__)

DROPPED = "dropped.tsv"
LOUD_SHARE = 0.1


class Report:
    def __init__(self, folder: Path):
        self.path = folder / DROPPED
        self.file = open(self.path, "w", encoding="utf-8")
        self.counts: Counter = Counter()

    def drop(self, rule: str, number: int | None, src: str, tgt: str) -> None:
        self.counts[rule] += 1
        self.file.write(f"{rule}\t{number or ''}\t{src}\t{tgt}\n")

    def finish(self, kept: int, cfg: DataConfig, shown: Path) -> dict[str, int]:
        """Log a line a rule; raise where more than data.drop_max_share went. Returns the counts."""
        self.file.close()
        judged, dropped = kept + sum(self.counts.values()), sum(self.counts.values())
        if dropped > cfg.drop_max_share * judged:
            raise DataError(f"cleaning would drop {dropped:,} of {judged:,} training pairs ({100 * dropped / judged:.0f}%, "
                            f"more than data.drop_max_share {cfg.drop_max_share}): is the corpus mostly noise, or "
                            f"does a rule not fit it? The counts by rule: {dict(self.counts)}; take a rule off with "
                            f"--set data.drop_<rule>=false (or 0), or raise data.drop_max_share")
        for rule in RULES:
            value = getattr(cfg, f"drop_{rule}")
            share = self.counts[rule] / max(1, judged)
            state = f"{self.counts[rule]:,} pairs ({100 * share:.2f}%)" if value else "off"
            logger.info("cleaning: %-10s %s", rule, state)
            if share > LOUD_SHARE:
                logger.warning("cleaning: the %s rule dropped %.1f%% of the training pairs: read a sample in %s; "
                               "--set data.%s=%s keeps them", rule, 100 * share, shown / DROPPED, f"drop_{rule}",
                               "false" if isinstance(value, bool) else 0)
        return {rule: self.counts[rule] for rule in RULES}
