// qkgrad-lm prepare: the embedded English corpus (corpora/bible.h, prepare_english_text).
#include "commands.h"

namespace qkgrad::lm_cli {

int cmd_prepare(int argc, char** argv) {
  corpora::BibleOptions o;
  o.out_dir = "data/english";
  Args args("qkgrad-lm prepare",
            "Builds DIR/train.txt, valid.txt and test.txt, one verse a line, from the World English Bible\n"
            "(SWORD module engWEB2015eb: apt-get install diatheke sword-text-web), split by whole books.\n"
            "Any UTF-8 text is a corpus too: put it in DIR/train.txt and DIR/valid.txt (and test.txt).");
  args.option("out", "output directory", &o.out_dir);
  args.option("diatheke", "the diatheke program", &o.diatheke);
  if (!args.parse(argc, argv, 2)) return 0;
  const corpora::EnglishTextStats stats = corpora::prepare_english_text(o);
  std::printf("%s\nwrote %s/{train,valid,test}.txt and stats.txt; next: qkgrad-lm train --data %s --run RUNDIR\n",
              stats.summary().c_str(), o.out_dir.c_str(), o.out_dir.c_str());
  return 0;
}

}  // namespace qkgrad::lm_cli
