"""Text as people write it (the stages of nmt.inference.text and the spans of nmt.data.protected_numbers):
paragraphs split into sentences and joined back with their spacing, over-long sentences cut at
their clauses, links, addresses and emoji kept byte for byte, capitals read in sentence case and
written back. The sentences here are made up for the tests."""

import re
from collections import Counter

import pytest

import nmt
from nmt.data.prepared_corpus import CaseCounts
from nmt.data.protected_numbers import SpanProtector, untranslated_spans
from nmt.data.tokenizer import TOKENIZER
from nmt.inference.text.case import TITLE, UPPER, CasedWords, case_style
from nmt.inference.text.case import write as restyled
from nmt.inference.text.records import SENTENCE
from nmt.inference.text.sentences import Segmenter
from nmt.inference.text.spans import span_places

EN = Segmenter("en", 60)


@pytest.mark.parametrize("text, sentences", [
    ("I went to the market this morning. It was raining, so I took an umbrella. The vendors were kind.",
     ["I went to the market this morning.", "It was raining, so I took an umbrella.", "The vendors were kind."]),
    ("Mr. Smith paid $3.50 for the book. Then he left.", ["Mr. Smith paid $3.50 for the book.", "Then he left."]),
    ('He said "Stop!" and ran. Nobody followed him.', ['He said "Stop!" and ran.', "Nobody followed him."]),
    ("Wait... What did you say? I didn't hear.", ["Wait...", "What did you say?", "I didn't hear."]),
    ("E.g. apples, pears, etc. are fruit. Vegetables are not.", ["E.g. apples, pears, etc. are fruit.",
                                                                 "Vegetables are not."]),
    ("Visit https://example.com/a.b?c=1 now. Then write.", ["Visit https://example.com/a.b?c=1 now.", "Then write."]),
    ("Go.", ["Go."]),
])
def test_a_paragraph_is_split_into_its_sentences(text, sentences):
    assert [s.text for s in EN.split(text).segments] == sentences


def test_french_abbreviations_are_not_sentence_ends():
    assert [s.text for s in Segmenter("fr", 60).split("M. et Mme Dupont sont là. Ils attendent.").segments] == [
        "M. et Mme Dupont sont là.", "Ils attendent."]


def test_a_language_without_rules_of_its_own_is_split_by_englishs():
    assert len(Segmenter("xx", 60).split("One. Two.").segments) == 2


def test_the_spacing_between_sentences_is_kept_blank_lines_included():
    segments = EN.split("  First one.  Second one.\n\nThird one.   Fourth one.  ").segments
    assert [(s.before, s.text) for s in segments] == [("", "First one."), ("  ", "Second one."),
                                                       ("\n\n", "Third one."), ("   ", "Fourth one.")]


def test_an_over_long_sentence_is_cut_at_its_clauses_and_nothing_is_lost():
    text = ("When I was a child, my grandmother used to tell me stories about her village, its river and her "
            "teacher, who had come from the city to teach the children to read and write.")
    parts = Segmenter("en", 12).split(text).segments
    assert all(len(p.text.split()) <= 12 for p in parts) and len(parts) > 2
    assert " ".join(p.text for p in parts) == text
    assert parts[0].text == "When I was a child," and all(p.clause for p in parts[:-1]) and not parts[-1].clause


def test_a_line_of_thousands_of_words_without_a_mark_is_cut_at_words():
    text = " ".join(f"w{i}" for i in range(3000))
    parts = Segmenter("en", 60).split(text).segments
    assert max(len(p.text.split()) for p in parts) <= 60
    assert " ".join(p.text for p in parts).split() == text.split()


@pytest.mark.parametrize("text, style", [
    ("WHERE IS THE TRAIN STATION?", UPPER), ("Where Is The Train Station?", TITLE), ("Where is the station?", SENTENCE),
    ("I am Tom.", SENTENCE), ("NASA", SENTENCE), ("VISIT https://example.com NOW", UPPER), ("Go Tom Go", TITLE),
])
def test_a_sources_case_style(text, style):
    assert case_style(text) == style


def test_capitals_are_read_as_the_corpus_writes_each_word():
    cased = CasedWords({"tom": "Tom", "i": "I", "boston": "Boston", "usa": "USA"})
    assert cased.sentence_case("TOM AND I WENT TO BOSTON, USA.") == "Tom and I went to Boston, USA."
    assert cased.sentence_case("WHERE IS THE TRAIN STATION?") == "Where is the train station?"
    assert cased.sentence_case("WRITE TO ME AT HTTPS://EXAMPLE.COM/A") == "Write to me at HTTPS://EXAMPLE.COM/A"
    assert restyled("Où est la gare ?", UPPER) == "OÙ EST LA GARE ?"
    assert restyled("Où est la gare ?", TITLE) == "Où Est La Gare ?"


def test_the_words_a_corpus_writes_with_capitals_are_counted_inside_sentences():
    sources = ["Tom is here.", "I saw Tom.", "Where is Tom?", "Where is the USA?", "I like the USA.",
               "I said so.", "Tom and I left.", "Can I go?", "Where are you?", "The tom cat sleeps."]
    counts, words = CaseCounts(), Counter()
    for text in sources:
        counts.add(text)
        words.update(TOKENIZER.tokenize(text))
    forms = counts.forms(words)
    assert forms["tom"] == "Tom" and forms["usa"] == "USA" and forms["i"] == "I"
    assert "where" not in forms and "the" not in forms


@pytest.mark.parametrize("text, spans", [
    ("Write to tom@example.com or visit https://example.com/a?b=1 today.",
     ["tom@example.com", "https://example.com/a?b=1"]),
    ("See docs/commands.md (and www.example.org).", ["docs/commands.md", "www.example.org"]),
    ("Run `pip install nmt` in ~/src/nmt or C:\\Users\\me now.", ["`pip install nmt`", "~/src/nmt", "C:\\Users\\me"]),
    ("Follow @nmt_dev and #MachineTranslation, not #1.", ["@nmt_dev", "#MachineTranslation"]),
    ("I love you ❤️ and 👨‍👩‍👧 and 🇫🇷!", ["❤️", "👨‍👩‍👧", "🇫🇷"]),
    ("It is 3.5 km and 12/05/2021.", []),
])
def test_what_passes_untranslated_is_found_whole(text, spans):
    assert [f.span.text for f in untranslated_spans(text)] == spans


def test_a_word_in_a_script_the_vocabulary_lacks_is_kept_and_so_is_a_number_with_spaces():
    protector = SpanProtector("en", "fr", known=frozenset("abcdefghijklmnopqrstuvwxyzILT .,"))
    text, spans = protector.protect_source("I love Tokyo 東京 タワー, 30 000 times.")
    # the number a placeholder the model reads; the span taken out, after its third word
    assert text == "I love Tokyo, ⦅N1⦆ times." and [s.text for s in spans] == ["30 000", "東京 タワー"]
    assert (spans[1].kept, spans[1].at, spans[1].tail) == (True, 3, None)
    assert protector.restore("J'aime Tokyo ⦅N2⦆, ⦅N1⦆ fois.", spans) == "J'aime Tokyo 東京 タワー, 30 000 fois."


@pytest.mark.parametrize("source, read, at, tail", [
    ("I like it https://a.org/x.", "I like it.", 3, "."),  # before the closing marks: they stay the sentence's
    ("Je t'aime ❤️ !", "Je t'aime !", 2, "!"),  # French spacing kept
    ("I love you ❤️", "I love you", 3, ""),
    ("@tom thanks a lot.", "thanks a lot.", 0, None),
    ("Send ~/a.txt to Tom.", "Send to Tom.", 1, None),
    ("Send it (see ~/a.txt) now.", "Send it (see) now.", 3, None),
    ("abc❤️def", "abc def", 1, None),
])
def test_a_span_is_taken_out_with_its_place_and_the_spacing_reads_without_it(source, read, at, tail):
    text, spans = SpanProtector("en", "fr").protect_source(source)
    assert (text, spans[-1].at, spans[-1].tail) == (read, at, tail)


def test_a_span_goes_back_where_its_neighbours_went():
    protector = SpanProtector("en", "fr")
    pieces = ["▁Envoie", "▁le", "▁fichier", "▁à", "▁Tom", "."]
    pairs = [(0, 0), (1, 3), (2, 4)]  # Send to Tom.
    _, inside = protector.protect_source("Send ~/a.txt to Tom.")
    assert span_places(pieces, inside, pairs) == [(3, 0)]  # before the word "to" went to
    _, unaligned = protector.protect_source("Send ~/a.txt Tom.")  # its next word unaligned: after its last's
    assert span_places(pieces, unaligned, [(0, 2)]) == [(3, 0)]
    _, end = protector.protect_source("Send to Tom ~/a.txt.")
    assert span_places(pieces, end, pairs) == [(5, 0)]  # before the output's closing mark
    _, first = protector.protect_source("@tom Send to Tom.")
    assert span_places(pieces, first, pairs) == [(0, 0)]


def test_a_training_pair_with_the_same_link_on_both_sides_gets_one_placeholder():
    protector = SpanProtector("en", "fr")
    assert protector.protect_pair("Go to https://a.org/1 at 7:45.", "Va sur https://a.org/1 à 7h45.") == (
        "Go to ⦅N1⦆ at ⦅N2⦆.", "Va sur ⦅N1⦆ à ⦅N2⦆.")
    assert protector.protect_pair("Go to https://a.org/1.", "Va sur https://a.org/2.") == (
        "Go to https://a.org/1.", "Va sur https://a.org/2.")


@pytest.fixture(scope="module")
def model(protected_run):
    return nmt.load(str(protected_run))


def test_a_paragraph_never_loses_a_sentence(model):
    sentences = ["I see a cat.", "She likes the house today.", "We have a big boat again."]
    alone = model.translate(sentences)
    assert model.translate(" ".join(sentences)) == " ".join(alone)
    assert model.translate("\n\n".join(sentences)) == "\n\n".join(alone)
    texts = ["I see a cat. We have a dog.", "Go.", "", "He wants green tea."]
    assert model.translate(texts)[0] == " ".join(model.translate(["I see a cat.", "We have a dog."]))
    assert model.translate(texts)[2] == ""


def test_a_paragraphs_attention_and_alignment_are_its_sentences_side_by_side(model):
    text = "I see a cat. We have a dog."
    t = model.translations([text])[0]
    assert len(t.parts) == 2 and t.words == t.text.split()
    att = model.attention(text, t)
    assert att.weights.shape == (len(t.tokens) + 1, len(att.src_tokens))
    assert att.weights.sum(1).allclose(att.weights.new_ones(len(t.tokens) + 1))
    first = len(t.parts[0].tokens)
    assert att.weights[:first, len(model.attention("I see a cat.").src_tokens) - 1:].sum() == 0


def without(text: str, span: str) -> str:
    """`text` with `span` gone, spaced alike however the span sat (French " !" or "!" at the end)."""
    return re.sub(r" ([.!?])", r"\1", " ".join((text.replace(span, " ") if span else text).split()))


def test_links_addresses_and_emoji_come_through_exactly_once(model):
    plain = model.nbest("I see a cat today.", n=3)[0]
    for span in ["https://example.com/a?b=1", "tom@example.com", "❤️", "~/notes.txt", "@nmt_dev", "`x = 1`"]:
        for source in (f"I see a cat {span} today.", f"I see a cat today {span}."):
            found = model.nbest(source, n=3)[0]
            assert all(t.text.count(span) == 1 for t in found), (span, found)
            # the model read the sentence without it: the rest is the plain sentence's translation
            assert [without(t.text, span) for t in found] == [without(t.text, "") for t in plain]
            assert all(len(t.token_scores) == len(t.tokens) + 1 for t in found)
            assert all(t.words == t.text.split() for t in found)  # a word of its own (--align, --markup)
    assert model.translate("❤️ 👍") == "❤️ 👍"  # nothing but spans: the spans


def test_a_source_in_capitals_comes_back_in_capitals(model):
    plain, upper = model.translate(["I see a cat.", "I SEE A CAT."])
    assert upper == plain.upper()
    assert model.translate("I See A Cat Today.") == " ".join(
        w[:1].upper() + w[1:] for w in model.translate("I see a cat today.").split(" "))


def test_a_line_of_thousands_of_words_is_translated_in_parts_not_cut(model, caplog):
    line = " ".join(["I see a cat"] * 750)  # 3,000 words, no sentence end
    with caplog.at_level("WARNING"):
        out = model.translate(line)
    assert out and not [r for r in caplog.records if "truncated" in r.getMessage()]
    longest = model.road.segmenter.longest  # data.max_len 24 pieces: 18 words
    assert longest == 18 and len(model.road.segmenter.split(line).segments) == -(-3000 // longest)


def test_a_span_before_a_word_spelled_from_a_lone_word_start_goes_before_the_whole_word():
    """An output word may begin with a lone "▁" and then its letters ("▁" "N" "ou" "s"): a span
    placed before it goes before the "▁", or it would be glued to the word ("❤️Nous")."""
    import dataclasses

    from nmt.data.protected_numbers import untranslated

    span = dataclasses.replace(untranslated("❤️"), at=1)  # before the source's second word ...
    pieces = ["▁", "N", "ou", "s", "▁voi", "s"]
    assert span_places(pieces, [span], [(1, 0)]) == [(0, 0)]  # ... which went to the output's first
    assert span_places(["▁Nous", "▁voi", "s"], [span], [(1, 0)]) == [(0, 0)]


DOMAINS = ["www.example.net", "example.com/path/to", "docs.python.org", "WWW.EXAMPLE.NET", "Example.COM",
           "bbc.co.uk/news", "github.com/user/repo", "DOCS.PYTHON.ORG/3/"]


@pytest.mark.parametrize("text, spans", [
    ("I found www.example.net you.", ["www.example.net"]),
    ("VISIT WWW.EXAMPLE.NET TODAY", ["WWW.EXAMPLE.NET"]),
    ("See example.net for more.", ["example.net"]),  # no www., no scheme: its suffix is a public one
    ("Read docs.python.org/3/library.", ["docs.python.org/3/library"]),  # the sentence's mark is not the link's
    ("Go to bbc.co.uk, then EXAMPLE.COM/Path?x=1.", ["bbc.co.uk", "EXAMPLE.COM/Path?x=1"]),
    ("E.g. the U.S. and Mr.Smith paid 3.5 dollars.", []),  # no public suffix: not a domain
    ("Mail anna.smith@example.org now.", ["anna.smith@example.org"]),  # an address, whole
])
def test_a_domain_without_a_scheme_is_a_span_and_a_word_with_a_dot_is_not(text, spans):
    assert [found.span.text for found in untranslated_spans(text)] == spans


def test_a_domain_without_a_scheme_comes_through_exactly_once(protected_run, real_corpus):
    """200 of fra-eng's test sources, each with a link or domain without a scheme in its middle (lower,
    upper and mixed case): each translation holds it exactly once; none of the test split's own
    sources reads as holding a domain."""
    from nmt.data.corpus import load_splits

    sources = sorted({pair.raw[0] for pair in load_splits(real_corpus).test})
    taken = [found.span.text for s in sources for found in untranslated_spans(s)]
    assert not [span for span in taken if re.fullmatch(r"[\w.-]+\.[A-Za-z]{2,}", span)], taken
    chosen, links = sources[:200], [DOMAINS[i % len(DOMAINS)] for i in range(200)]
    middles = [max(1, len(s.split()) // 2) for s in chosen]
    linked = [" ".join(s.split()[:m] + [link] + s.split()[m:]) for s, link, m in zip(chosen, links, middles)]
    outputs = nmt.load(protected_run).translate(linked, beam=1)
    assert [out.count(link) for out, link in zip(outputs, links)] == [1] * 200


CROWDED = ["Call me at +33 6 12 34 56 78 on 12/05/2021 at 7:45 or 8:30 😀.",
           "The scores were 1-0, 2-1, 3-3, 4-2, 0-0, 5-1, 2-2, 1-1, 3-0, 6-2, 7-7 and 30 000 in total.",
           "I have 11 cats, 12 dogs, 13 birds, 14 fish, 15 mice, 16 rats, 17 ants, 18 bees, 19 frogs and 20 snails, "
           "see www.example.net.",
           "Rooms 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119 and "
           "120 are free."]


def test_a_sentence_with_more_spans_than_placeholders_keeps_every_one(model):
    """Ten to twenty numbers and spans in a sentence (more than its nine placeholders): it is cut
    between them into parts that each have placeholders enough, and every number and span comes back
    exactly once, no digit invented (greedy and beam)."""
    for beam in (1, 5):
        for source, output in zip(CROWDED, model.translate(CROWDED, beam=beam)):
            assert Counter(re.findall(r"\d+", output)) == Counter(re.findall(r"\d+", source)), (source, output)
            for kept in ("😀", "www.example.net"):
                assert output.count(kept) == source.count(kept), (source, output)
