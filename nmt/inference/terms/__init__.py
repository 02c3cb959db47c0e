"""Terms a translation must contain: the glossary (what to write for which source words), the
search's steering toward what a sentence owes (glossary terms and strict numbers' placeholders)
and its beam policy, and the French article before a term."""
