// What the subcommands share (commands.h).
#include "commands.h"

namespace qkgrad::translate_cli {

SplitFiles split_files_of_run(const std::string& run, std::string data, const std::string& split) {
  const RunDir rd{run};
  check_is_run_directory(run);
  const RunSettings options = load_run_settings(rd.options());
  if (data.empty()) {
    data = options.data;
    if (!data.empty() && data.front() != '/') {  // runs of older versions stored the path as given
      std::fprintf(stderr,
                   "note: %s gives the data directory as the relative path '%s' (a run of an older qkgrad), read "
                   "from the current directory; pass --data to choose it\n",
                   rd.options().c_str(), data.c_str());
    }
  }
  SplitFiles files{corpus_path(data, split, options.src), corpus_path(data, split, options.tgt), options.bleu_tokenize};
  if (!std::filesystem::exists(files.src) || !std::filesystem::exists(files.tgt)) {
    // Every NAME with both NAME.SRC and NAME.TGT in DATA, each plain or gzipped (.gz).
    std::vector<std::string> splits;
    const std::string src_suffix = "." + options.src;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(data, ec)) {
      std::string name = entry.path().filename().string();
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
      if (name.size() <= src_suffix.size() || name.compare(name.size() - src_suffix.size(), src_suffix.size(), src_suffix) != 0) {
        continue;
      }
      const std::string stem = name.substr(0, name.size() - src_suffix.size());
      if (std::filesystem::exists(corpus_path(data, stem, options.tgt), ec) &&
          std::find(splits.begin(), splits.end(), stem) == splits.end()) {
        splits.push_back(stem);
      }
    }
    std::sort(splits.begin(), splits.end());
    fail(cat("--split ", split, ": ", std::filesystem::exists(files.src) ? files.tgt : files.src,
             " does not exist (nor gzipped, .gz); ", data,
             splits.empty() ? cat(" has no NAME.", options.src, " with NAME.", options.tgt, " (plain or .gz)")
                            : cat(" has the splits ", join(splits, ", "))));
  }
  return files;
}

std::vector<std::string> read_input_lines(const std::string& input) {
  if (!input.empty()) return read_text_lines(input);
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  QKGRAD_CHECK(!std::cin.bad(), "<stdin>: reading failed");
  return split_text_lines(text, "<stdin>");
}

void check_stdout(const std::string& writing) {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int err = errno;
  fail(cat(writing, " to stdout failed: ", err ? std::strerror(err) : "I/O error",
           "; free some disk space, or write them with --output"));
}


void print_scores(const std::vector<std::string>& hyps, const ReferenceStreams& refs, const std::string& hyp_name,
                  const std::vector<std::string>& ref_names, const ReportOptions& options, bool warn) {
  for (std::size_t r = 0; r < refs.size(); ++r) {
    QKGRAD_CHECK(hyps.size() == refs[r].size(), hyp_name, " has ", hyps.size(), " lines but ", ref_names[r], " has ",
                 refs[r].size(), "; they must be aligned line by line");
  }
  const std::string report = score_report(hyps, refs, options);
  const std::string warning = tokenized_text_warning(hyps, options.scoring.tokenize);
  if (warn && !warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  std::fputs(report.c_str(), stdout);
}

const char* mode_title(AttentionMode mode) {
  switch (mode) {
    case AttentionMode::qknorm: return "QKNorm";
    case AttentionMode::scaled_dot: return "scaled dot-product";
    case AttentionMode::rms_qknorm: return "RMS QK-norm";
    case AttentionMode::layer_qknorm: return "LayerNorm QK-norm";
  }
  return "?";
}

// The job's communicator, made by main() for `train`: MPI under mpirun, else one process.
distributed::Communicator* g_comm = nullptr;

}  // namespace qkgrad::translate_cli
