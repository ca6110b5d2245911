#include "tools/loadgen/workload.hpp"

namespace loadgen {

workload_generator::workload_generator(const options& o, const setup_data& setup, std::uint64_t stream)
    : options_(o),
      rng_(o.seed * 0x9E3779B97F4A7C15ULL + stream),
      parties_(static_cast<std::uint32_t>(setup.parties.size())),
      hub_(static_cast<std::uint32_t>(setup.hub_index())),
      employer_(static_cast<std::uint32_t>(setup.employer_index())),
      mix_p2p_from_(o.mix_payments),
      mix_salary_from_(o.mix_payments + o.mix_p2p),
      mix_total_(o.mix_payments + o.mix_p2p + o.mix_salaries),
      party_(0, parties_ - 1),
      other_party_(0, parties_ > 1 ? parties_ - 2 : 0),
      amount_(o.amount_min_minor, o.amount_max_minor) {}

operation workload_generator::next() {
  operation op;
  op.transfer = !(options_.read_fraction > 0 && unit_(rng_) < options_.read_fraction);
  switch (options_.workload) {
    case workload_kind::hot_merchant:
      op.from = party_(rng_);
      op.to = hub_;
      break;
    case workload_kind::payday:
      op.from = hub_;
      op.to = party_(rng_);
      break;
    case workload_kind::p2p: pick_pair(op); break;
    case workload_kind::mix: {
      const double draw = unit_(rng_) * mix_total_;
      if (draw < mix_p2p_from_) {
        op.from = party_(rng_);
        op.to = hub_;
      } else if (draw < mix_salary_from_) {
        pick_pair(op);
      } else {
        op.from = employer_;
        op.to = party_(rng_);
      }
      break;
    }
  }
  op.amount_minor = amount_(rng_);
  return op;
}

void workload_generator::pick_pair(operation& op) {
  op.from = party_(rng_);
  op.to = other_party_(rng_);
  if (op.to >= op.from) ++op.to;
}

}  // namespace loadgen
