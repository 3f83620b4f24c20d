// qkgrad-translate prepare-bible: the embedded Spanish→English Bible corpus (corpora/bible.h).
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_prepare_bible(int argc, char** argv) {
  BibleOptions o;
  Args args("qkgrad-translate prepare-bible",
            "Builds train/dev/test.{es,en} from the Reina-Valera 1909 (Spanish) and World English Bible\n"
            "SWORD modules (apt-get install diatheke sword-text-sparv sword-text-web).");
  args.option("out", "output directory", &o.out_dir, true);
  args.option("diatheke", "the diatheke program", &o.diatheke);
  if (!args.parse(argc, argv, 2)) return 0;
  const BibleStats stats = prepare_bible(o);
  std::printf("%s\n", stats.summary().c_str());
  return 0;
}

}  // namespace qkgrad::translate_cli
