// Cleaning the text of one verse of the Bible corpus (corpora/bible.h): diatheke's OSIS markup,
// footnotes and Strong's numbers, entities, whitespace, and the fixes that one module needs
// (the RV1909's drop capitals and subscriptions, the WEB's glossary). Each function takes and
// returns one verse's text; which verses get which fix is bible.h's clean_spanish/clean_english.
// docs/bible-corpus.md gives the real examples behind every rule.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace qkgrad::corpora {

// The text of a verse without its markup, as one line of normalised UTF-8:
//  - footnotes (<note>...</note>, and plain format's "[1:1 ...]") are removed; where the
//    converter dropped the space after a footnote ("God<note>...</note>created") a space is
//    put back, except before closing punctuation;
//  - every other tag is removed (<w lemma="G5547">...</w>, <milestone/>, <div/>, <l/>), and so
//    are plain format's Strong's numbers ("Jesucristo <G2424> <G5547>");
//  - XML entities are decoded (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;);
//  - a speaker label standing alone between runs of 3+ spaces ("beloved?    Beloved   Under
//    the apple tree", WEB Song of Solomon 8:5) is removed;
//  - zero-width characters are removed (remove_zero_width), then every run of whitespace
//    becomes one space and the ends are trimmed (normalize_spaces, io/text.h: tabs, newlines,
//    no-break spaces, U+2000-U+200A, U+3000, ...).
// Bytes that are not valid UTF-8 are kept as they are (align_verses reports them).
std::string clean_verse(const std::string& raw);

// `text` without the invisible characters that join rather than separate: U+00AD (soft hyphen),
// U+200B-U+200F (zero-width space, non-joiner, joiner, direction marks), U+2060 (word joiner)
// and U+FEFF (byte order mark). They are not whitespace (io/text.h), so normalize_spaces keeps
// them; in the Bibles they only break up words ("c\u200Bd" is "cd"). Bytes that are not valid
// UTF-8 are kept as they are.
std::string remove_zero_width(std::string_view text);


// The number of code points in well-formed UTF-8 text (bytes that are not continuation bytes).
std::size_t utf8_length(const std::string& text);

// The lower-case forms of the words that a text usually writes with a capital letter in the
// middle of a sentence: names such as "jehová", "moisés". undo_drop_capital uses it.
std::set<std::string> capitalised_words(const std::vector<std::string>& texts);

// The RV1909 prints the first word of every chapter in capitals, a drop capital ("EN el
// principio", "Y DESPUÉS movió", "A JEHOVÁ llamé"). This lower-cases the first run of words in
// capitals, keeping a capital letter where a sentence starts and for the words in `names`
// ("En el principio", "Y después movió", "A Jehová llamé"). Apply it to verse 1 only.
std::string undo_drop_capital(const std::string& text, const std::set<std::string>& names);

// The RV1909 ends the Pauline epistles with the KJV's subscriptions ("... Amén. Fué escrita á
// los Hebreos desde Italia con Timoteo."), which the WEB does not have: this cuts what follows
// the last "Amén." when something does. Apply it to the last verse of those 14 books.
std::string strip_subscription(const std::string& text);

// The WEB appends its glossary to Revelation 22:21 ("... Amen. World English Bible Glossary The
// following words ..."): this cuts the text from that title on.
std::string strip_appendix(const std::string& text);

}  // namespace qkgrad::corpora
