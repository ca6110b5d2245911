// ThreadSanitizer builds only (-DWALLET_SANITIZE=thread; see actors/CMakeLists.txt): makes the
// hand-off of every CAF message, from the thread that sends it to the thread that runs the
// receiving actor, visible to TSan.
//
// Debian's libcaf_core is not built with -fsanitize=thread. It publishes a message to an actor's
// mailbox, and takes it out again, with atomic instructions inside the library, which TSan does
// not see; so TSan reports every read of a message (and of everything the message owns: strings,
// vectors, callbacks) by the receiving actor as a race with its construction by the sender. A
// suppression cannot tell those from real races in actor code: both have our handlers on one side
// and CAF's scheduler frames under them. Instead, the two library functions every message passes
// through are interposed here. scheduled_actor::enqueue (sender side, before the message is
// published) declares a happens-before edge on the mailbox element; scheduled_actor::consume
// (receiver side, before any handler sees the message) waits for it. A message still in the
// mailbox when its actor terminates is never consumed but destroyed by scheduled_actor::cleanup:
// for those, enqueue also declares an edge on the receiving actor, which cleanup waits for. All
// three are virtual functions whose vtable slots the dynamic linker binds by symbol, so the
// executable's definitions below (exported with --export-dynamic-symbol) win over the library's,
// and forward to them.

#include <dlfcn.h>

#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>

#include <utility>

#include "base/assert.hpp"

// ThreadSanitizer's dynamic annotations (part of its runtime).
extern "C" void AnnotateHappensBefore(const char* file, int line, const volatile void* address);
extern "C" void AnnotateHappensAfter(const char* file, int line, const volatile void* address);

namespace {

// The library's own definition of a function this file interposes.
template <typename Function>
Function library_definition(const char* mangled_name) {
  void* found = ::dlsym(RTLD_NEXT, mangled_name);
  WALLET_ASSERT(found != nullptr, "libcaf_core defines the function interposed for TSan");
  return reinterpret_cast<Function>(found);
}

}  // namespace

namespace caf {

void scheduled_actor::enqueue(mailbox_element_ptr ptr, execution_unit* eu) {
  using function = void (*)(scheduled_actor*, mailbox_element_ptr, execution_unit*);
  static const auto next = library_definition<function>(
      "_ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEPNS_14execution_"
      "unitE");
  AnnotateHappensBefore(__FILE__, __LINE__, ptr.get());
  AnnotateHappensBefore(__FILE__, __LINE__, this);
  next(this, std::move(ptr), eu);
}

bool scheduled_actor::cleanup(error&& fail_state, execution_unit* host) {
  using function = bool (*)(scheduled_actor*, error&&, execution_unit*);
  static const auto next =
      library_definition<function>("_ZN3caf15scheduled_actor7cleanupEONS_5errorEPNS_14execution_unitE");
  AnnotateHappensAfter(__FILE__, __LINE__, this);
  return next(this, std::move(fail_state), host);
}

invoke_message_result scheduled_actor::consume(mailbox_element& x) {
  using function = invoke_message_result (*)(scheduled_actor*, mailbox_element&);
  static const auto next = library_definition<function>("_ZN3caf15scheduled_actor7consumeERNS_15mailbox_elementE");
  AnnotateHappensAfter(__FILE__, __LINE__, &x);
  return next(this, x);
}

}  // namespace caf
