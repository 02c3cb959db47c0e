"""The road a text takes: stages that read it before search (markup, case, sentences, kept spans and
numbers, glossary terms) and write its translation after, each one's two halves side by side in
one module, and the pipeline (`road`) that runs them. No stage imports the translator or the
search loop; the search is given what a stage asks of it (`decoding.policies.Hooks`)."""
