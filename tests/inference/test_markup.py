"""Markup through translation (`nmt translate --markup`, nmt.inference.text.markup): tags out of the
source, back around the aligned output words, the output always well formed with every tag once."""

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import nmt
from nmt.cli import app
from nmt.inference.text.markup import MarkupError, parse, read


def tags_of(text: str) -> list[tuple[str, dict, tuple[str, ...]]]:
    """Each element of `text` (parsed as XML inside a root) as (name, attributes, its ancestors' names)."""
    found = []

    def walk(node, ancestors):
        for child in node:
            found.append((child.tag, dict(child.attrib), ancestors))
            walk(child, ancestors + (child.tag,))

    walk(ET.fromstring(f"<root>{text}</root>"), ())
    return sorted(found, key=repr)


def test_tags_go_around_the_output_words_aligned_to_the_words_they_wrapped():
    source = parse('Click <b>Save</b> to keep <a href="x">your <i>file</i></a>.<br/>Done &amp; dusted')
    assert source.text == "Click Save to keep your file. Done & dusted"
    words = "Klicken Sie auf Speichern , um Ihre Datei zu behalten . Fertig & erledigt".split()
    pairs = [(0, 0), (0, 1), (2, 2), (1, 3), (2, 4), (2, 5), (4, 6), (5, 7), (3, 8), (3, 9), (5, 10), (6, 11),
             (7, 12), (8, 13)]
    assert source.restore(words, pairs) == ('Klicken Sie auf <b>Speichern</b> , um <a href="x">Ihre <i>Datei</i></a> '
                                            'zu behalten . <br/> Fertig &amp; erledigt')
    assert source.restore(words, pairs) == source.restore(words, pairs)  # the source's places are kept


def test_a_tag_inside_a_word_wraps_the_whole_word_and_nesting_follows_the_source():
    source = parse("un<b>believ</b>able <i><u>story</u></i>")
    assert source.text == "unbelievable story"
    # the alignment crosses: the tags still come back nested as in the source
    assert source.restore(["histoire", "incroyable"], [(0, 1), (1, 0)]) == (
        "<i><u>histoire</u></i> <b>incroyable</b>")


def test_a_tag_follows_each_source_words_most_attentive_output_word_not_every_word_that_glanced_at_it():
    import torch

    from nmt.inference.text.words import alignment, source_alignment

    source = parse("The <b>cat</b> sleeps")
    src_words = [("The", [0]), ("cat", [1]), ("sleeps", [2])]
    out_words = [("Le", [0]), ("chat", [1]), ("dort", [2]), (".", [3])]
    weights = torch.tensor([[0.8, 0.1, 0.1],
                            [0.1, 0.8, 0.1],
                            [0.1, 0.5, 0.4],  # "dort" glances at "cat" more than at "sleeps"
                            [0.1, 0.1, 0.8]])  # "." attends "sleeps" most, but a word takes it
    by_output = alignment(weights, src_words, out_words)
    assert source.restore([w for w, _ in out_words], by_output) == "Le <b>chat dort</b> ."
    by_source = source_alignment(weights, src_words, out_words)
    assert by_source == [(0, 0), (1, 1), (2, 2)]
    assert source.restore([w for w, _ in out_words], by_source) == "Le <b>chat</b> dort ."


@pytest.mark.parametrize("text, message", [
    ("<b>Go", "'<b>' is never closed"),
    ("Go</b> now", "'</b>' closes a tag that was never opened"),
    ("<b><i>Go</b></i>", "'</b>' closes <i>, which is still open"),
    ("1 < 2 and <b>3</b>", "'1 < 2 and' is not a tag"),
])
def test_malformed_markup_is_one_error_when_asked_for_and_text_otherwise(text, message):
    with pytest.raises(MarkupError, match=f"line 3: {message}"):
        read(text, True, "line 3")
    assert read(text, None, "line 3") is None  # not asked for: translated as the text it is
    assert read("<b>Go</b>", False, "line 1") is None and read("Go now.", None, "line 1") is None


WORDS = ["alpha", "beta", "gamma", "delta", "eps"]


@st.composite
def marked_up(draw, depth=0):
    """Inline markup: words, paired tags (some empty, some with attributes), self-closing tags."""
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["word", "word", "pair", "self"] if depth < 3 else ["word", "self"]))
        name = draw(st.sampled_from(["b", "i", "a", "x", "span"]))
        attrs = draw(st.sampled_from(["", ' id="1"', ' href="http://e.x/?a=1&amp;b=2"', " class='c d'"]))
        if kind == "word":
            parts.append(draw(st.sampled_from(WORDS)) + draw(st.sampled_from(["", "", ".", ","])))
        elif kind == "self":
            parts.append(f"<{name}{attrs}/>")
        else:
            parts.append(f"<{name}{attrs}>{draw(marked_up(depth + 1))}</{name}>")
    return draw(st.sampled_from([" ", ""])).join(parts)


@settings(max_examples=300, deadline=None)
@given(marked_up(), st.integers(0, 12), st.randoms(use_true_random=False))
def test_any_markup_and_any_alignment_give_well_formed_output_with_every_tag_once(text, out_len, rnd):
    source = parse(text)
    words = [f"w{i}" for i in range(out_len)]
    src_len = len(source.text.split())
    pairs = [(rnd.randrange(src_len), o) for o in range(out_len) if rnd.random() < 0.8] if src_len else []
    out = source.restore(words, pairs)
    assert tags_of(out) == tags_of(text)  # every tag once, same attributes, same ancestors: nesting kept
    assert "".join(ET.fromstring(f"<root>{out}</root>").itertext()).split() == words  # the words, in order


def test_a_real_model_keeps_the_tags_and_translates_the_text(protected_run):
    model = nmt.load(protected_run)
    plain = model.translate(["I see a cat.", "I have 23 cats."])
    marked = model.translate(["I see a <b>cat</b>.", 'I have <a href="u">23 cats</a>.<br/>'], markup=True)
    for out, text, source in zip(marked, plain, ["I see a <b>cat</b>.", 'I have <a href="u">23 cats</a>.<br/>']):
        assert tags_of(out) == tags_of(source), out
        assert "".join(ET.fromstring(f"<root>{out}</root>").itertext()).split() == text.split()
    assert "23" in marked[1]
    assert model.translate(["<br/>", "", "<b></b>"], markup=True) == ["<br/>", "", "<b></b>"]  # no text: the tags alone


def test_the_command_keeps_markup_and_says_what_is_malformed(protected_run):
    runner = CliRunner()
    result = runner.invoke(app, ["translate", "-c", str(protected_run), "--markup", "I see a <b>cat</b>."])
    assert result.exit_code == 0 and tags_of(result.stdout.strip()) == [("b", {}, ())], result.stdout
    result = runner.invoke(app, ["translate", "-c", str(protected_run), "--markup", "I see a <b>cat."])
    assert result.exit_code == 1 and "line 1: '<b>' is never closed" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["translate", "-c", str(protected_run), "I see a <b>cat."])
    assert result.exit_code == 0  # not asked for and not well formed: translated as text


def test_a_tag_steps_past_a_frequent_word_written_before_its_words_translation():
    """The decoder reads "koalas" as it writes the article before "koalas": the tag moves one word
    on where the word it chose is frequent, the next is not and reads the source word at least half
    as much; a frequent source word, a next word that is frequent too or reads it little, stays."""
    import torch

    from nmt.inference.text.words import FrequentWords, source_alignment

    frequent = FrequentWords.of([".", "the", "are", "is"], ["les", ".", "sont", "l'", "est"], top=4)
    assert frequent.source == {"the", "are", "is"} and frequent.target == {"les", "sont", "l'", "est"}
    assert frequent.in_target("Les") and frequent.in_target("sont.") and frequent.in_source("The")
    assert not frequent.in_target("l'homme") and not frequent.in_target(".") and not frequent.in_source("Les")
    source = parse("<b>Koalas</b> are cute")
    src_words = [("Koalas", [0]), ("are", [1]), ("cute", [2])]
    out_words = [("Les", [0]), ("koalas", [1]), ("sont", [2]), ("mignons", [3])]
    weights = torch.tensor([[0.7, 0.1, 0.2],   # "Les" reads "Koalas" most: it is written first
                            [0.5, 0.3, 0.2],   # "koalas" reads it too, not quite as much
                            [0.1, 0.8, 0.1],
                            [0.1, 0.1, 0.8]])
    words = [w for w, _ in out_words]
    assert source.restore(words, source_alignment(weights, src_words, out_words)) == "<b>Les</b> koalas sont mignons"
    stepped = source_alignment(weights, src_words, out_words, frequent)
    assert stepped == [(0, 1), (1, 2), (2, 3)]
    assert source.restore(words, stepped) == "Les <b>koalas</b> sont mignons"
    glancing = weights.clone()
    glancing[1] = torch.tensor([0.3, 0.5, 0.2])  # under half of what "Les" gave "Koalas"
    assert source_alignment(glancing, src_words, out_words, frequent)[0] == (0, 0)
    common = FrequentWords.of(["koalas"], ["les"])  # a frequent source word keeps its word
    assert source_alignment(weights, src_words, out_words, common)[0] == (0, 0)
    both = FrequentWords.of([], ["les", "koalas"])  # the next word is frequent too
    assert source_alignment(weights, src_words, out_words, both)[0] == (0, 0)

