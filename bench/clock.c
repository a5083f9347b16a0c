/* The core clock, roughly: a chain of dependent integer adds (one a cycle on every x86 core we ran on), timed.
 *   gcc -O2 bench/clock.c -o /tmp/clock && /tmp/clock          (x86-64 only; pin with taskset -c N) */
#include <stdio.h>
#include <time.h>

int main(void) {
  for (int r = 0; r < 5; r++) {
    struct timespec a, b;
    unsigned long n = 2000000000UL, x = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    __asm__ volatile("1: add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tsub $4, %1\n\tjnz 1b" : "+r"(x), "+r"(n));
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    printf("%.2f GHz\n", 2e9 / s / 1e9);
  }
  return 0;
}
