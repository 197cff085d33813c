// Runtime of the Metal kernel emulator: threadgroups, barriers and
// SIMD-group exchanges over real threads. It is compiled as its own
// translation unit, apart from the kernels, so that the MSL keyword macros of
// the prelude never meet the standard library.
//
// A dispatch runs its threadgroups one after another (threadgroup variables
// are static storage). Inside a threadgroup, logical threads are started on
// demand: a worker runs logical threads one after another until one of them
// blocks in a barrier, and only then is another worker woken to start the
// next. A kernel without barriers thus runs on one OS thread; a kernel with
// barriers gets one OS thread per logical thread, as on a GPU every thread of
// the group is live at the barrier. Barrier misuse (some threads returned
// while others wait, lanes missing from a SIMD-group operation) is detected
// exactly and aborts the dispatch with a message.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
typedef struct {
  uint32_t tpitg[3];  // thread_position_in_threadgroup
  uint32_t tgpig[3];  // threadgroup_position_in_grid
  uint32_t tptg[3];   // threads_per_threadgroup
  uint32_t tgpg[3];   // threadgroups_per_grid
  uint32_t tpig[3];   // thread_position_in_grid
  uint32_t tpg[3];    // threads_per_grid
  uint32_t tiitg;     // thread_index_in_threadgroup
  uint32_t sgitg;     // simdgroup_index_in_threadgroup
  uint32_t tiisg;     // thread_index_in_simdgroup
  uint32_t tpsg;      // threads_per_simdgroup
  uint32_t sgptg;     // simdgroups_per_threadgroup
} EmuPos;
typedef void (*EmuEntry)(void** args, const EmuPos* pos);
}

namespace {

constexpr int kLanes = 32;
constexpr int kSlot = 64;  // bytes per lane in a SIMD exchange
constexpr int kMaxThreads = 1024;
constexpr int kMaxSG = kMaxThreads / kLanes;
constexpr uint32_t kAbortBit = 1u << 31;
// next holds kIdle between dispatches, so that a worker woken late never
// starts a thread of a group that is being set up.
constexpr uint32_t kIdle = 1u << 30;

struct Abort {};

// The threadgroup variables of every kernel (see the prelude).
#if defined(__ELF__)
extern "C" char __start_emu_tg[] __attribute__((weak));
extern "C" char __stop_emu_tg[] __attribute__((weak));
void poison_threadgroup_memory() {
  if (__start_emu_tg && __stop_emu_tg > __start_emu_tg) memset(__start_emu_tg, 0xff, __stop_emu_tg - __start_emu_tg);
}
#else
void poison_threadgroup_memory() {}
#endif

struct Group {
  // Immutable while the group runs.
  EmuEntry entry = nullptr;
  void** args = nullptr;
  uint32_t tg[3] = {1, 1, 1}, grid[3] = {1, 1, 1}, gid[3] = {0, 0, 0};
  uint32_t n = 0, nsg = 0;

  std::atomic<uint32_t> next{kIdle};  // next logical thread to start

  // Everything below is guarded by mu.
  // Barrier generations: a release adds one, an abort sets kAbortBit.
  // Waiters sleep on them with atomic wait (a futex), not on mu.
  std::atomic<uint32_t> tg_gen{0};
  std::atomic<uint32_t> sg_gen[kMaxSG];
  std::atomic<bool> aborted{false};

  std::mutex mu;
  std::condition_variable done_cv;
  uint32_t tg_arrived = 0;
  uint32_t sg_arrived[kMaxSG];
  uint32_t sg_exited[kMaxSG];
  uint32_t waiting = 0, exited = 0, done = 0;
  std::string error;

  alignas(64) unsigned char slots[kMaxSG][2][kLanes][kSlot];

  uint32_t lanes(uint32_t sg) const {
    uint32_t left = n - sg * kLanes;
    return left < kLanes ? left : kLanes;
  }
};

struct Ctx {
  Group* g;
  uint32_t tid, sg, lane;
  uint32_t parity;
};

thread_local Ctx* cur = nullptr;

// Pool of OS threads that run logical threads on demand.
struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  int idle = 0, tokens = 0, total = 0;
  Group* g = nullptr;
};

Pool pool;

void fail_locked(Group* g, const std::string& msg) {
  if (!g->aborted.load()) {
    g->aborted.store(true);
    g->error = msg;
  }
  g->tg_gen.fetch_or(kAbortBit);
  g->tg_gen.notify_all();
  for (uint32_t s = 0; s < g->nsg; s++) {
    g->sg_gen[s].fetch_or(kAbortBit);
    g->sg_gen[s].notify_all();
  }
}

// check_stuck reports a deadlock once every live thread is waiting and no
// barrier can release any more. Called with g->mu held.
void check_stuck(Group* g) {
  if (g->aborted || g->waiting == 0) return;
  if (g->waiting + g->exited < g->n) return;
  char buf[200];
  snprintf(buf, sizeof buf,
           "barrier divergence in threadgroup (%u,%u,%u): %u threads wait in a barrier while %u have returned "
           "or wait in another barrier",
           g->gid[0], g->gid[1], g->gid[2], g->waiting, g->exited);
  fail_locked(g, buf);
}

void* worker_main(void*);

// request_worker wakes or starts an OS thread to go on starting logical
// threads. It returns false when no thread could be started.
bool request_worker(Group* g) {
  if (g->next.load() >= g->n) return true;
  std::lock_guard<std::mutex> l(pool.mu);
  if (pool.idle > pool.tokens) {
    pool.tokens++;
    pool.cv.notify_one();
    return true;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  pool.tokens++;
  pool.total++;
  bool ok = pthread_create(&t, &attr, worker_main, nullptr) == 0;
  if (!ok) {
    pool.tokens--;
    pool.total--;
  }
  pthread_attr_destroy(&attr);
  return ok;
}

void run_one(Group* g, uint32_t tid) {
  Ctx c{g, tid, tid / kLanes, tid % kLanes, 0};
  cur = &c;
  EmuPos p;
  uint32_t x = tid % g->tg[0], y = (tid / g->tg[0]) % g->tg[1], z = tid / (g->tg[0] * g->tg[1]);
  uint32_t loc[3] = {x, y, z};
  for (int i = 0; i < 3; i++) {
    p.tpitg[i] = loc[i];
    p.tgpig[i] = g->gid[i];
    p.tptg[i] = g->tg[i];
    p.tgpg[i] = g->grid[i];
    p.tpig[i] = g->gid[i] * g->tg[i] + loc[i];
    p.tpg[i] = g->grid[i] * g->tg[i];
  }
  p.tiitg = tid;
  p.sgitg = c.sg;
  p.tiisg = c.lane;
  p.tpsg = kLanes;
  p.sgptg = g->nsg;
  bool ok = true;
  try {
    g->entry(g->args, &p);
  } catch (Abort&) {
    ok = false;
  }
  cur = nullptr;
  std::lock_guard<std::mutex> l(g->mu);
  if (ok) {
    g->exited++;
    g->sg_exited[c.sg]++;
    if (g->sg_arrived[c.sg] > 0)
      fail_locked(g, "SIMD-group operation reached by only some lanes (the others returned)");
    else
      check_stuck(g);
  }
  if (++g->done == g->n) g->done_cv.notify_all();
}

void run_some(Group* g) {
  for (;;) {
    uint32_t i = g->next.fetch_add(1);
    if (i >= g->n) return;
    run_one(g, i);
  }
}

void* worker_main(void*) {
  for (;;) {
    Group* g;
    {
      std::unique_lock<std::mutex> l(pool.mu);
      pool.idle++;
      pool.cv.wait(l, [] { return pool.tokens > 0; });
      pool.tokens--;
      pool.idle--;
      g = pool.g;
    }
    if (g) run_some(g);
  }
  return nullptr;
}

// wait_locked blocks the calling logical thread until pred holds, first
// making sure that some OS thread goes on starting the logical threads not
// yet started.
// wait_gen blocks until gen moves on from old. The caller holds l and has
// counted itself in g->waiting; whoever releases the barrier takes the
// released threads off that count.
void wait_gen(std::unique_lock<std::mutex>& l, Group* g, std::atomic<uint32_t>& gen, uint32_t old) {
  check_stuck(g);
  bool more = g->next.load() < g->n;
  l.unlock();
  if (more && gen.load() == old && !request_worker(g)) {
    l.lock();
    fail_locked(g, "cannot start another OS thread for the threadgroup");
    l.unlock();
  }
  uint32_t v;
  while ((v = gen.load()) == old) gen.wait(old);
  if (v & kAbortBit) throw Abort{};
}

}  // namespace

extern "C" {

// emu_threadgroup_barrier implements threadgroup_barrier: every thread of the
// group waits until all have arrived.
void emu_threadgroup_barrier(void) {
  Group* g = cur->g;
  std::unique_lock<std::mutex> l(g->mu);
  uint32_t gen = g->tg_gen.load();
  if (gen & kAbortBit) throw Abort{};
  if (++g->tg_arrived == g->n) {
    g->waiting -= g->n - 1;
    g->tg_arrived = 0;
    g->tg_gen.fetch_add(1);
    g->tg_gen.notify_all();
    return;
  }
  g->waiting++;
  wait_gen(l, g, g->tg_gen, gen);
}

// emu_simd_exchange publishes size bytes of the calling lane's value, waits
// for every lane of its SIMD-group, and returns the base of the group's
// slots: lane i's value is at base + i*64. The slots alternate between two
// buffers, so a lane may read them until its next exchange.
void* emu_simd_exchange(const void* v, uint32_t size) {
  Ctx* c = cur;
  Group* g = c->g;
  if (size > (uint32_t)kSlot) {
    std::lock_guard<std::mutex> l(g->mu);
    fail_locked(g, "SIMD-group exchange of more than 64 bytes");
    throw Abort{};
  }
  unsigned char* base = &g->slots[c->sg][c->parity][0][0];
  c->parity ^= 1;
  memcpy(base + c->lane * kSlot, v, size);
  std::unique_lock<std::mutex> l(g->mu);
  uint32_t s = c->sg;
  uint32_t gen = g->sg_gen[s].load();
  if (gen & kAbortBit) throw Abort{};
  if (++g->sg_arrived[s] == g->lanes(s)) {
    g->waiting -= g->lanes(s) - 1;
    g->sg_arrived[s] = 0;
    g->sg_gen[s].fetch_add(1);
    g->sg_gen[s].notify_all();
    return base;
  }
  if (g->sg_exited[s] > 0) {
    fail_locked(g, "SIMD-group operation reached by only some lanes (the others returned)");
    throw Abort{};
  }
  g->waiting++;
  wait_gen(l, g, g->sg_gen[s], gen);
  return base;
}

// emu_simd_lanes returns the number of lanes of the calling thread's
// SIMD-group (32 except in a partial last group).
uint32_t emu_simd_lanes(void) { return cur->g->lanes(cur->sg); }

// emu_lane returns the calling thread's lane in its SIMD-group.
uint32_t emu_lane(void) { return cur->lane; }

// emu_thread_index returns the calling thread's index in its threadgroup.
uint32_t emu_thread_index(void) { return cur->tid; }

// emu_threads returns the number of threads of the calling thread's group.
uint32_t emu_threads(void) { return cur->g->n; }

// emu_abort fails the dispatch with msg (a kernel's misuse of an MSL
// facility that the prelude detects) and ends the calling thread.
void emu_abort(const char* msg) {
  Group* g = cur->g;
  {
    std::lock_guard<std::mutex> l(g->mu);
    fail_locked(g, msg);
  }
  throw Abort{};
}

// emu_dispatch runs grid[0]·grid[1]·grid[2] threadgroups of tg[0]·tg[1]·tg[2]
// threads each, one group at a time. It returns 0, or -1 with a message in
// err when a group was aborted.
int emu_dispatch(EmuEntry entry, void** args, const uint32_t* grid, const uint32_t* tg, char* err, int errlen) {
  uint32_t n = tg[0] * tg[1] * tg[2];
  if (n == 0 || n > (uint32_t)kMaxThreads) {
    snprintf(err, errlen, "threadgroup of %u threads (want 1..%d)", n, kMaxThreads);
    return -1;
  }
  static std::mutex dispatch_mu;  // one dispatch at a time per process
  std::lock_guard<std::mutex> dl(dispatch_mu);
  static Group group;  // reused: dispatches are serialised
  Group* g = &group;
  g->aborted.store(false);
  g->error.clear();
  g->entry = entry;
  g->args = args;
  for (int i = 0; i < 3; i++) {
    g->tg[i] = tg[i];
    g->grid[i] = grid[i];
  }
  g->n = n;
  g->nsg = (n + kLanes - 1) / kLanes;
  {
    std::lock_guard<std::mutex> l(pool.mu);
    pool.g = g;
  }
  int rc = 0;
  for (uint32_t z = 0; z < grid[2] && rc == 0; z++)
    for (uint32_t y = 0; y < grid[1] && rc == 0; y++)
      for (uint32_t x = 0; x < grid[0] && rc == 0; x++) {
        {
          std::lock_guard<std::mutex> l(g->mu);
          g->gid[0] = x;
          g->gid[1] = y;
          g->gid[2] = z;
          g->tg_arrived = 0;
          g->tg_gen.store(0);
          for (uint32_t s = 0; s < g->nsg; s++) {
            g->sg_arrived[s] = 0;
            g->sg_exited[s] = 0;
            g->sg_gen[s].store(0);
          }
          g->waiting = g->exited = g->done = 0;
          poison_threadgroup_memory();
          g->next.store(0);
        }
        run_some(g);
        std::unique_lock<std::mutex> l(g->mu);
        g->done_cv.wait(l, [&] { return g->done == g->n; });
        if (g->aborted.load()) {
          snprintf(err, errlen, "%s", g->error.c_str());
          rc = -1;
        }
      }
  g->next.store(kIdle);
  return rc;
}

}  // extern "C"
