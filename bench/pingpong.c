/* Cross-core round trip in C (the reference for bench/pingpong.mjs): two threads pinned to CPUs 0 and 1 hand a counter
 * back and forth through one atomic int; prints ns per round trip.
 *   gcc -O2 -pthread bench/pingpong.c -o /tmp/pingpong && /tmp/pingpong */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 200000
static _Atomic int flag __attribute__((aligned(64)));

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *other(void *arg) {
  (void)arg;
  pin(1);
  for (int i = 0; i < ROUNDS; i++) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {}
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  return 0;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, 0, other, 0);
  pin(0);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < ROUNDS; i++) {
    atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  pthread_join(t, 0);
  printf("round trip %.0f ns\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ROUNDS);
  return 0;
}
