"""Cleaning a corpus's training split before it trains: the rules a pair is judged by (`rules`),
duplicates found in one pass over millions of pairs (`duplicates`), and the report of what went
(`report`). Dev and test pairs are never cleaned: they are what a run is graded on."""
