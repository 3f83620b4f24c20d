// The Bible corpus (corpora/bible.h): parsing diatheke's output, cleaning verses
// (snippets copied from the real spaRV1909eb and engWEB2015eb output), the alignment rules, the
// book split, and one end-to-end run of prepare_bible when diatheke and both modules are
// installed (apt-get install diatheke sword-text-sparv sword-text-web).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "corpora/bible.h"
#include "corpora/process.h"
#include "io/text.h"
#include "temp_dir.h"

using namespace qkgrad;
using namespace qkgrad::corpora;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Why the end-to-end test cannot run here, or empty when it can.
std::string missing_tools() {
  TempDir dir;
  const std::string list = dir.path + "/modules.txt";
  const std::string command = "diatheke -b system -k modulelistnames > " + list + " 2>/dev/null";
  if (std::system(command.c_str()) != 0) return "diatheke is not installed";
  const std::vector<std::string> modules = lines_of(list);
  for (const char* m : {"spaRV1909eb", "engWEB2015eb"}) {
    if (std::find(modules.begin(), modules.end(), m) == modules.end()) {
      return cat("the SWORD module ", m, " is not installed");
    }
  }
  return "";
}

// Writes an executable shell script that stands in for diatheke.
std::string fake_program(const TempDir& dir, const std::string& body) {
  const std::string path = dir.path + "/fake-diatheke";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

RawVerse raw(const std::string& book, int chapter, int v, const std::string& heading,
             const std::string& text) {
  return RawVerse{VerseRef{book, chapter, v}, heading, text};
}

Verse verse(const std::string& book, int chapter, int v, const std::string& text) {
  return Verse{VerseRef{book, chapter, v}, text};
}

}  // namespace

// ---- Parsing ----------------------------------------------------------------------------

TEST_CASE("parse_diatheke_output: OSIS lines, headings before the reference, module line",
          "[bible]") {
  // As `diatheke -b engWEB2015eb -f OSIS -o fh -l en -k "Ps 2:12-3:1"` prints them.
  const std::string output =
      "Psalms 2:12: <w>Give</w> sincere homage <w>to</w> <w>the</w> <w>Son</w>,"
      "<note placement=\"foot\">2:12 or, Kiss the son</note> <w>lest</w> <w>he</w> <w>be</w> "
      "<w>angry</w>.   <milestone type=\"line\"/>\n"
      "A Psalm by David, when he fled from Absalom his son.  Psalms 3:1: Yahweh, how <w>my</w> "
      "adversaries <w>have</w> increased!<milestone type=\"line\"/>\n"
      "ALEPH  Psalms 119:1: <w>Blessed</w> <w>are</w> <w>those</w>\n"
      " <w>Beloved</w>   Song of Solomon 5:10: My <w>beloved</w> <w>is</w> white\n"
      "<div sID=\"gen35566\" type=\"x-p\"/>III John 1:15: <milestone type=\"line\"/>\n"
      "(engWEB2015eb)\n";
  const std::vector<RawVerse> verses = parse_diatheke_output(output, "engWEB2015eb");
  REQUIRE(verses.size() == 5);
  CHECK(to_string(verses[0].ref) == "Psalms 2:12");
  CHECK(verses[0].heading.empty());
  CHECK(to_string(verses[1].ref) == "Psalms 3:1");
  CHECK(verses[1].heading == "A Psalm by David, when he fled from Absalom his son.");
  CHECK(verses[1].text.rfind("Yahweh, how", 0) == 0);
  CHECK(verses[2].heading == "ALEPH");
  CHECK(to_string(verses[3].ref) == "Song of Solomon 5:10");
  CHECK(verses[3].heading == "<w>Beloved</w>");
  CHECK(to_string(verses[4].ref) == "III John 1:15");  // not "John 1:15"
  CHECK(clean_verse(verses[4].text).empty());
}

TEST_CASE("parse_diatheke_output: verses that span lines (plain format)", "[bible]") {
  // As `diatheke -b engWEB2015eb -f plain -k "Ps 1:1-2"` prints them: poetry, one line per
  // line of verse, a blank line after each verse.
  const std::string output =
      "Psalms 1:1: Blessed is the man who doesn’t walk in the counsel of the wicked,\n"
      "nor stand on the path of sinners,\n"
      "nor sit in the seat of scoffers; \n"
      "\n"
      "Psalms 1:2: but his delight is in Yahweh’s law.\n"
      "On his law he meditates day and night. \n"
      "\n"
      "(engWEB2015eb)\n";
  const std::vector<RawVerse> verses = parse_diatheke_output(output, "engWEB2015eb");
  REQUIRE(verses.size() == 2);
  CHECK(clean_verse(verses[0].text) ==
        "Blessed is the man who doesn’t walk in the counsel of the wicked, nor stand on the path "
        "of sinners, nor sit in the seat of scoffers;");
  CHECK(clean_verse(verses[1].text) ==
        "but his delight is in Yahweh’s law. On his law he meditates day and night.");
}

TEST_CASE("parse_diatheke_output: errors name the line", "[bible]") {
  CHECK_THROWS_WITH(parse_diatheke_output("some preface\nGenesis 1:1: In the beginning\n", "m"),
                    Contains("line 1") && Contains("before the first verse"));
  CHECK_THROWS_WITH(parse_diatheke_output("Malachi 4:6: He will turn\nTobit 1:1: The book\n", "m"),
                    Contains("line 2") && Contains("not among the 66"));
  CHECK(parse_diatheke_output("(m)\n", "m").empty());
}

// ---- Cleaning ---------------------------------------------------------------------------

TEST_CASE("clean_verse: OSIS markup, Strong's lemmas and footnotes", "[bible]") {
  // The converter dropped the space after the footnote: "God<note>...</note><w>created".
  CHECK(clean_verse(
            "<w>In</w> <w>the</w> <w>beginning</w>, <w>God</w><note placement=\"foot\">1:1 The "
            "Hebrew word rendered “God” is “אלהים” (Elohim).</note><w>created</w> <w>the</w> "
            "<w>heavens</w> <w>and</w> <w>the</w> <w>earth</w>.<milestone type=\"line\"/>") ==
        "In the beginning, God created the heavens and the earth.");
  // A footnote before punctuation leaves no space; one after a comma, one space.
  CHECK(
      clean_verse("<w>Son</w>,<note placement=\"foot\">2:12 or, Kiss the son</note> <w>lest</w>") ==
      "Son, lest");
  CHECK(clean_verse("in <w>God</w>.”<note placement=\"foot\">3:2 ...</note> Selah."
                    "<milestone type=\"line\"/>") == "in God.” Selah.");
  CHECK(clean_verse("<w>word</w><note placement=\"foot\">x</note>, next") == "word, next");
  // Strong's numbers as attributes (OSIS) and as text (plain format).
  CHECK(clean_verse("<w>Señor</w> <w lemma=\"G5547\">Jesucristo</w> <w>sea con</w> "
                    "<w>todos</w> <w>vosotros</w>. <w>Amén</w>.   <milestone type=\"line\"/>") ==
        "Señor Jesucristo sea con todos vosotros. Amén.");
  CHECK(clean_verse(
            "La <G3588> gracia <G5485> de nuestro <G2257> Señor <G2962> Jesucristo <G2424> <G5547> "
            "sea con <G3326> todos <G3956> vosotros <G5216>. Amén <G0281>.   ") ==
        "La gracia de nuestro Señor Jesucristo sea con todos vosotros. Amén.");
  // Plain format's footnotes.
  CHECK(clean_verse("In the beginning, God [1:1 The Hebrew word rendered “God” is Elohim.] "
                    "created the heavens") == "In the beginning, God created the heavens");
  CHECK(clean_verse("a [bracketed] word") == "a [bracketed] word");
}

TEST_CASE("clean_verse: <w> elements that touch a word (RV1909)", "[bible]") {
  // Ezekiel 1:1, I Chronicles 18:6 and Psalm 35:5 as the module has them: the words need a
  // space...
  CHECK(clean_verse("<w>Y FUÉ</w>que<w>á los treinta</w> <w>años</w>, en el mes<w>cuarto</w>,") ==
        "Y FUÉ que á los treinta años, en el mes cuarto,");
  CHECK(clean_verse("<w>Y puso</w> <w>David</w>guarnición<w>en Siria</w> <w>la de Damasco</w>") ==
        "Y puso David guarnición en Siria la de Damasco");
  CHECK(clean_verse("<w>y el ángel</w> <w>de Jehová</w>los<w>acose</w>.") ==
        "y el ángel de Jehová los acose.");
  // ...but not before punctuation, nor before an enclitic pronoun that ends the verb
  // (I Chronicles 28:10, Genesis 25:33).
  CHECK(clean_verse("¿<w>Dónde estás tú</w>?") == "¿Dónde estás tú?");
  CHECK(clean_verse("<w>esfuérzate</w>, <w>y haz</w>la.<milestone type=\"line\"/>") ==
        "esfuérzate, y hazla.");
  CHECK(clean_verse("<w>Y dijo</w> <w>Jacob</w>: <w>Júrame</w>lo <w>en este día</w>.") ==
        "Y dijo Jacob: Júramelo en este día.");
  CHECK(clean_verse("<w>de</w>la casa") == "de la casa");
  CHECK(clean_verse("<w>no</w>lo<w>hizo</w>") == "no lo hizo");
}

TEST_CASE("clean_verse: entities, labels, whitespace", "[bible]") {
  CHECK(clean_verse("Tom &amp; Jerry &lt;3 &#233;&#xE9; &bogus; a&b") ==
        "Tom & Jerry <3 éé &bogus; a&b");
  // WEB Song of Solomon 8:5: a speaker label inside the verse.
  CHECK(clean_verse(
            "<w>on</w> <w>her</w> <w>beloved</w>?    <w>Beloved</w>   <w>Under</w> <w>the</w> "
            "<w>apple</w> <w>tree</w>") == "on her beloved? Under the apple tree");
  // Tabs, no-break spaces and zero-width characters; a cut-off tag at the end.
  // (\xC2\xA0 is U+00A0, a no-break space; \xE2\x80\x8B is U+200B, a zero-width space.)
  CHECK(clean_verse("  a\tb\xC2\xA0" "c\xE2\x80\x8B" "d  \n e <milestone") == "a b cd e");
  CHECK(clean_verse("<note>only a footnote</note>").empty());
  // Invalid UTF-8 is kept (and reported by align_verses).
  CHECK(clean_verse("caf\xC3") == "caf\xC3");
  // The whitespace of normalize_spaces (io/text.h): U+3000, U+2029, U+0085, U+1680, ...; the
  // zero-width characters go first, so a run of spaces around one is still one space.
  CHECK(clean_verse("a\u3000\u3000b\u2029c\xC2\x85" "d\u1680e\u00A0\u200B\u00A0f") ==
        "a b c d e f");
  CHECK(clean_verse("a \u200B b\u00AD\u2060c\uFEFF") == "a bc");
}

TEST_CASE("remove_zero_width: joiners, soft hyphens and marks go, everything else stays",
          "[bible]") {
  CHECK(remove_zero_width("a\u00ADb\u200Bc\u200Cd\u200De\u200Ef\u200Fg\u2060h\uFEFF") ==
        "abcdefgh");
  CHECK(remove_zero_width(" a\u00A0b\u3000") == " a\u00A0b\u3000");  // whitespace is not its job
  CHECK(remove_zero_width("caf\xC3\u200B") == "caf\xC3");             // invalid bytes are kept
  CHECK(remove_zero_width("").empty());
}

TEST_CASE("UTF-8 validation and length", "[bible]") {
  CHECK(is_valid_utf8("Jehová “ 😀"));
  CHECK_FALSE(is_valid_utf8("caf\xC3"));       // cut-off sequence
  CHECK_FALSE(is_valid_utf8("\xC0\xAF"));      // overlong
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));  // surrogate
  CHECK_FALSE(is_valid_utf8("\xE9t\xE9"));     // Latin-1, not UTF-8
  CHECK(utf8_length("Jehová") == 6);
  CHECK(length_ratio("abcd", "ab") == 2.0);
  CHECK(length_ratio("áá", "ab") == 1.0);
}

TEST_CASE("undo_drop_capital: the RV1909's capitals at the start of a chapter", "[bible]") {
  const std::set<std::string> names = {"jehová", "adam"};
  CHECK(undo_drop_capital("EN el principio crió Dios", names) == "En el principio crió Dios");
  CHECK(undo_drop_capital("Y DESPUÉS movió el pueblo", names) == "Y después movió el pueblo");
  CHECK(undo_drop_capital("DE OCHO años era Josías", names) == "De ocho años era Josías");
  CHECK(undo_drop_capital("Y CONOCIÓ Adam", names) == "Y conoció Adam");
  CHECK(undo_drop_capital("¿CAZARÁS tú la presa", names) == "¿Cazarás tú la presa");
  CHECK(undo_drop_capital("Cántico gradual. A JEHOVÁ llamé", names) ==
        "Cántico gradual. A Jehová llamé");
  CHECK(undo_drop_capital("Y Á SUS discípulos dice:", names) == "Y á sus discípulos dice:");
  CHECK(undo_drop_capital("ALEPH. BIENAVENTURADOS los perfectos", names) ==
        "Aleph. Bienaventurados los perfectos");
  CHECK(undo_drop_capital("Salmo de David. ¡OH Jehová", names) == "Salmo de David. ¡Oh Jehová");
  CHECK(undo_drop_capital("no capitals here", names) == "no capitals here");
}

TEST_CASE("capitalised_words: names are capitalised in mid-sentence", "[bible]") {
  const std::set<std::string> names = capitalised_words(
      {"Y dijo Jehová a Moisés", "y habló Jehová: Esto", "El pueblo dijo", "Y el pueblo"});
  CHECK(names.count("jehová") == 1);
  CHECK(names.count("moisés") == 1);
  CHECK(names.count("pueblo") == 0);
  CHECK(names.count("esto") == 0);  // capitalised only after ':' (a sentence start)
}

TEST_CASE("strip_subscription and strip_appendix", "[bible]") {
  CHECK(strip_subscription("La gracia sea con todos vosotros. Amén. Fué escrita á los Hebreos "
                           "desde Italia con Timoteo.") ==
        "La gracia sea con todos vosotros. Amén.");
  CHECK(strip_subscription("sin Amén aquí") == "sin Amén aquí");
  CHECK(strip_appendix(
            "be with all the saints. Amen. World English Bible Glossary The following words") ==
        "be with all the saints. Amen.");
  CHECK(strip_appendix("Amen.") == "Amen.");
}

TEST_CASE("clean_spanish and clean_english: headings, subscriptions, drop capitals", "[bible]") {
  std::vector<RawVerse> es;
  es.push_back(raw("Psalms", 3, 1, "", "<w>Salmo</w> <w>de David</w>. ¡<w>OH</w> <w>Jehová</w>"));
  es.push_back(raw("Psalms", 3, 2, "", "<w>Muchos</w> <w>dicen</w> <w>Jehová</w> y Jehová"));
  es.push_back(raw("Hebrews", 13, 25, "",
                   "La gracia sea con todos vosotros. Amén. Fué escrita á los Hebreos."));
  const std::vector<Verse> spanish = clean_spanish(es);
  CHECK(spanish[0].text == "Salmo de David. ¡Oh Jehová");
  CHECK(spanish[2].text == "La gracia sea con todos vosotros. Amén.");

  std::vector<RawVerse> en;
  en.push_back(
      raw("Psalms", 3, 1, "A Psalm by David.", "Yahweh, how my adversaries have increased!"));
  en.push_back(raw("Psalms", 119, 1, "ALEPH", "<w>Blessed</w> <w>are</w> <w>those</w>"));
  en.push_back(
      raw("Song of Solomon", 5, 10, "<w>Beloved</w>", "My <w>beloved</w> <w>is</w> white"));
  en.push_back(raw("Revelation of John", 22, 21, "",
                   "Amen.         World English Bible Glossary   The following"));
  const std::vector<Verse> english = clean_english(en);
  CHECK(english[0].text == "A Psalm by David. Yahweh, how my adversaries have increased!");
  CHECK(english[1].text == "ALEPH Blessed are those");
  CHECK(english[2].text == "My beloved is white");
  CHECK(english[3].text == "Amen.");
}

// ---- Alignment --------------------------------------------------------------------------

TEST_CASE("align_verses: every drop reason", "[bible]") {
  const std::string es11 = "Y dijo Dios", en11 = "God said x.";  // 11 code points each
  std::vector<Verse> es = {
      verse("Genesis", 1, 1, es11),
      verse("Genesis", 1, 2, es11),
      verse("Genesis", 1, 4, ""),
      verse("Genesis", 1, 5, es11),
      verse("Genesis", 1, 6, "caf\xC3"),
      verse("Genesis", 1, 7, es11 + es11 + es11),
      // Numbers 13: every pair is far from 1:1 -> the whole chapter goes.
      verse("Numbers", 13, 1, "corto"),
      verse("Numbers", 13, 2, "un texto bastante largo de verdad"),
  };
  std::vector<Verse> en = {
      verse("Genesis", 1, 1, en11),
      verse("Genesis", 1, 3, en11),
      verse("Genesis", 1, 4, en11),
      verse("Genesis", 1, 5, ""),
      verse("Genesis", 1, 6, en11),
      verse("Genesis", 1, 7, en11),
      verse("Numbers", 13, 1, "a rather long text, really"),
      verse("Numbers", 13, 2, "short"),
  };
  // Enough good pairs that the one outlier (1:7) does not make Genesis 1 look misaligned.
  for (int v = 10; v < 20; ++v) {
    es.push_back(verse("Genesis", 1, v, es11));
    en.push_back(verse("Genesis", 1, v, en11));
  }
  const Alignment a = align_verses(es, en);
  REQUIRE(a.pairs.size() == 11);
  CHECK(to_string(a.pairs[0].ref) == "Genesis 1:1");
  CHECK(to_string(a.pairs[1].ref) == "Genesis 1:10");
  const auto dropped = [&](DropReason r) { return a.dropped[static_cast<std::size_t>(r)]; };
  CHECK(dropped(DropReason::missing_english) == 1);  // 1:2
  CHECK(dropped(DropReason::missing_spanish) == 1);  // 1:3
  CHECK(dropped(DropReason::empty_spanish) == 1);    // 1:4
  CHECK(dropped(DropReason::empty_english) == 1);    // 1:5
  CHECK(dropped(DropReason::invalid_utf8) == 1);     // 1:6
  CHECK(dropped(DropReason::length_ratio) == 1);     // 1:7 (33 vs 11 code points)
  CHECK(dropped(DropReason::chapter_misaligned) == 2);
  CHECK(a.misaligned_chapters == std::vector<std::string>{"Numbers 13"});

  es.push_back(verse("Genesis", 1, 1, "otra vez"));
  CHECK_THROWS_WITH(align_verses(es, en), Contains("Genesis 1:1 twice"));
}

TEST_CASE("align_verses: pairs come out in canonical order", "[bible]") {
  const std::vector<Verse> es = {verse("Revelation of John", 1, 1, "uno"),
                                 verse("Genesis", 2, 1, "dos"), verse("Genesis", 1, 10, "diez"),
                                 verse("Genesis", 1, 9, "nueve")};
  const std::vector<Verse> en = {verse("Genesis", 1, 9, "nine."), verse("Genesis", 1, 10, "ten."),
                                 verse("Genesis", 2, 1, "two"),
                                 verse("Revelation of John", 1, 1, "one")};
  const Alignment a = align_verses(es, en);
  REQUIRE(a.pairs.size() == 4);
  CHECK(a.pairs[0].english == "nine.");
  CHECK(a.pairs[1].english == "ten.");
  CHECK(a.pairs[2].english == "two");
  CHECK(a.pairs[3].english == "one");
}

// ---- The split --------------------------------------------------------------------------

TEST_CASE("split_of_book: every book in exactly one split, whole books held out", "[bible]") {
  const std::vector<std::string>& books = bible_books();
  REQUIRE(books.size() == 66);
  CHECK(books[38] == "Malachi");
  CHECK(books[39] == "Matthew");
  std::map<Split, std::vector<std::string>> by_split;
  for (const std::string& book : books) {
    CHECK(book_index(book) >= 0);
    by_split[split_of_book(book)].push_back(book);
  }
  CHECK(by_split[Split::dev] == std::vector<std::string>{"Ezekiel", "Romans"});
  CHECK(by_split[Split::test] == std::vector<std::string>{"Daniel", "Acts"});
  CHECK(by_split[Split::train].size() == 62);
  // Parallel passages stay together: the synoptic gospels, Samuel/Kings/Chronicles, the
  // Psalms that repeat 2 Samuel 22 and 1 Chronicles 16, Isaiah 36-39 and 2 Kings 18-20, ...
  for (const char* book :
       {"Matthew",  "Mark",     "Luke",         "John",          "I Samuel",   "II Samuel",
        "I Kings",  "II Kings", "I Chronicles", "II Chronicles", "Psalms",     "Isaiah",
        "Jeremiah", "Ezra",     "Nehemiah",     "Ephesians",     "Colossians", "II Peter",
        "Jude",     "Obadiah",  "Micah"}) {
    CHECK(split_of_book(book) == Split::train);
  }
  CHECK(std::string(split_name(Split::dev)) == "dev");
  CHECK(book_index("Tobit") == -1);
  CHECK_THROWS_WITH(split_of_book("Tobit"), Contains("'Tobit' is not one of the 66"));
}

// ---- End to end -------------------------------------------------------------------------

TEST_CASE("run_program: output, exit status, a missing program, the time limit", "[bible]") {
  const ProgramResult r = run_program({"sh", "-c", "printf 'o u t'; printf err >&2; exit 4"}, 10);
  CHECK(r.spawn_error == 0);
  CHECK(r.exit_status == 4);
  CHECK(r.out == "o u t");
  CHECK(r.err == "err");
  CHECK(run_program({"no-such-program-qkgrad"}, 10).spawn_error == ENOENT);
  CHECK(run_program({"sh", "-c", "kill -9 $$"}, 10).exit_status == 128 + 9);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_program({"sleep", "5"}, 0.2, "the test"),
                    Contains("the test: `sleep 5` ran longer than 0.2 s and was stopped"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK_THROWS_WITH(run_program({}, 1), Contains("argv is empty"));
  CHECK(describe_command({"diatheke", "-k", "Genesis 1:1"}) == "`diatheke -k 'Genesis 1:1'`");
}

TEST_CASE("prepare_bible: clear errors without diatheke, when it fails or hangs", "[bible]") {
  TempDir dir;
  BibleOptions options;
  options.out_dir = dir.path + "/out";
  options.diatheke = "/nonexistent/diatheke";
  CHECK_THROWS_WITH(prepare_bible(options),
                    Contains("was not found") &&
                        Contains("apt-get install diatheke sword-text-sparv sword-text-web"));
  options.diatheke = "no-such-program-qkgrad";
  CHECK_THROWS_WITH(prepare_bible(options), Contains("was not found on PATH"));

  options.diatheke = fake_program(dir, "echo 'something is wrong' >&2; exit 3");
  CHECK_THROWS_WITH(prepare_bible(options),
                    Contains("failed with exit status 3") && Contains("something is wrong"));
  options.diatheke = fake_program(dir, "echo otherModule");
  CHECK_THROWS_WITH(prepare_bible(options), Contains("'spaRV1909eb' is not installed") &&
                                                Contains("otherModule") &&
                                                Contains("apt-get install sword-text-sparv"));
  options.diatheke = fake_program(dir, "while :; do :; done");  // hangs
  options.timeout_seconds = 0.3;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(prepare_bible(options),
                    Contains("ran longer than 0.3 s") && Contains("was stopped"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));

  options.diatheke = "diatheke";
  options.out_dir = "";
  CHECK_THROWS_WITH(prepare_bible(options), Contains("out_dir is empty"));
  const std::string file = dir.path + "/a-file";
  std::ofstream(file) << "x";
  options.out_dir = file;
  CHECK_THROWS_WITH(prepare_bible(options), Contains("cannot create the output directory"));
}

TEST_CASE("prepare_bible: a module that is not installed", "[bible]") {
  const std::string why = missing_tools();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir dir;
  BibleOptions options;
  options.out_dir = dir.path;
  options.english_module = "noSuchModule";
  CHECK_THROWS_WITH(prepare_bible(options), Contains("'noSuchModule' is not installed") &&
                                                Contains("spaRV1909eb") && Contains("installmgr"));
}

TEST_CASE("prepare_bible: the real corpus, end to end", "[bible][e2e]") {
  const std::string why = missing_tools();
  if (!why.empty()) {
    WARN("skipped: "
         << why << "; install with: sudo apt-get install diatheke sword-text-sparv sword-text-web");
    return;
  }
  TempDir dir;
  BibleOptions options;
  options.out_dir = dir.path + "/new/corpus";  // created, parents too
  const auto start = std::chrono::steady_clock::now();
  const BibleStats stats = prepare_bible(options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 60);

  // Every file is there, the two sides of a split line up, and the counts match the stats.
  for (std::size_t s = 0; s < kSplits; ++s) {
    const std::string base = options.out_dir + "/" + split_name(static_cast<Split>(s));
    const std::vector<std::string> es = lines_of(base + ".es"), en = lines_of(base + ".en");
    CHECK(es.size() == stats.verses[s]);
    CHECK(en.size() == stats.verses[s]);
    for (std::size_t i = 0; i < es.size(); ++i) {
      if (es[i].empty() || en[i].empty() || es[i].find('<') != std::string::npos ||
          en[i].find('<') != std::string::npos || !is_valid_utf8(es[i]) || !is_valid_utf8(en[i])) {
        FAIL("bad line " << i + 1 << " of " << base << ": '" << es[i] << "' / '" << en[i] << "'");
      }
    }
  }
  CHECK(stats.verses[static_cast<std::size_t>(Split::dev)] >= 1000);
  CHECK(stats.verses[static_cast<std::size_t>(Split::dev)] <= 2000);
  CHECK(stats.verses[static_cast<std::size_t>(Split::test)] >= 1000);
  CHECK(stats.verses[static_cast<std::size_t>(Split::test)] <= 2000);
  CHECK(stats.total_verses() > 29000);
  CHECK(stats.total_dropped() < 1500);

  // Known verses, cleaned: the first and last of the Bible are in train.
  const std::vector<std::string> es = lines_of(options.out_dir + "/train.es");
  const std::vector<std::string> en = lines_of(options.out_dir + "/train.en");
  CHECK(es.front() == "En el principio crió Dios los cielos y la tierra.");
  CHECK(en.front() == "In the beginning, God created the heavens and the earth.");
  CHECK(en.back() == "The grace of the Lord Jesus Christ be with all the saints. Amen.");

  std::ifstream stats_file(options.out_dir + "/stats.txt");
  const std::string summary((std::istreambuf_iterator<char>(stats_file)),
                            std::istreambuf_iterator<char>());
  CHECK(summary == stats.summary());
  CHECK_THAT(summary, Contains("dev (2): Ezekiel, Romans") && Contains("test (2): Daniel, Acts"));
  CHECK_THAT(summary, Contains("diatheke: ") && Contains("spanish module: spaRV1909eb (Reina Valera") &&
                          Contains("english module: engWEB2015eb (World English Bible"));
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(options.out_dir)) {
    ++files;
    CHECK(entry.path().string().find(".tmp.") == std::string::npos);  // no temporary left behind
  }
  CHECK(files == 7);
}

TEST_CASE("prepare_english_text: qkgrad-lm's English corpus, end to end", "[bible][e2e]") {
  const std::string why = missing_tools();
  if (!why.empty()) {
    WARN("skipped: " << why << "; install with: sudo apt-get install diatheke sword-text-web");
    return;
  }
  TempDir dir;
  BibleOptions options;
  options.out_dir = dir.path + "/english";
  options.spanish_module = "noSuchModule";  // not needed, not checked
  const EnglishTextStats stats = prepare_english_text(options);
  std::size_t verses = 0;
  for (std::size_t s = 0; s < kSplits; ++s) {
    const std::string path = options.out_dir + "/" + english_text_file(static_cast<Split>(s));
    const std::vector<std::string> lines = lines_of(path);
    CHECK(lines.size() == stats.verses[s]);
    CHECK(fs::file_size(path) == stats.bytes[s]);
    for (const std::string& line : lines) {
      if (line.empty() || line.find('<') != std::string::npos || !is_valid_utf8(line)) FAIL("bad line in " << path << ": '" << line << "'");
    }
    verses += lines.size();
  }
  CHECK(verses > 30000);  // every verse of the English module, not only those aligned with the Spanish
  CHECK(stats.dropped < 100);
  // The books of the translation corpus's split: valid starts with Ezekiel, test with Daniel.
  CHECK(lines_of(options.out_dir + "/train.txt").front() == "In the beginning, God created the heavens and the earth.");
  CHECK(lines_of(options.out_dir + "/valid.txt").front().rfind("Now in the thirtieth year, in the fourth month", 0) == 0);
  CHECK(lines_of(options.out_dir + "/test.txt").front().rfind("In the third year of the reign of Jehoiakim", 0) == 0);
  CHECK(lines_of(options.out_dir + "/stats.txt").size() > 5);
  options.english_module = "noSuchModule";
  CHECK_THROWS_WITH(prepare_english_text(options), Contains("'noSuchModule' is not installed"));
}
