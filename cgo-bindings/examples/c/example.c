/*
 * The C example of libsimba: a lock around a job, an election with
 * callbacks and a step-down, and the cost of acquire+release.
 *
 *   cc -std=c11 -Wall -o example example.c $(pkg-config --cflags --libs simba)
 *   ./example memory://demo lock        # or redis://127.0.0.1:6379/0
 *   ./example memory://demo election
 *   ./example memory://demo bench 100000
 *
 * Every mode ends by checking that no handle is left open, and exits with 0
 * only when everything went as documented.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <simba.h>

/* check prints the last error and exits when st is not SIMBA_OK. */
static void check(simba_status st, const char *what) {
	if (st == SIMBA_OK) {
		return;
	}
	char msg[512];
	simba_last_error(msg, sizeof msg, NULL);
	fprintf(stderr, "%s: %s: %s\n", what, simba_status_name(st), msg);
	exit(1);
}

/* no_leaks fails when a handle is still open after the client closed. */
static void no_leaks(void) {
	simba_stats s;
	check(simba_stats_get(&s), "stats");
	if (s.clients + s.terms + s.elections + s.cancels != 0) {
		fprintf(stderr, "leaked handles: %lld clients, %lld terms, %lld elections, %lld cancels\n",
		        (long long)s.clients, (long long)s.terms, (long long)s.elections, (long long)s.cancels);
		exit(1);
	}
	printf("no handle left open\n");
}

static simba_handle open_client(const char *url) {
	simba_options opts = {0};
	opts.size = sizeof opts;
	opts.lease_ms = 3000; /* renewed every second */
	opts.identity = "c-example";
	simba_handle client;
	check(simba_client_open(url, &opts, &client), "open");
	return client;
}

/* A job run under a lock: the token goes with every write. */
static int run_lock(const char *url) {
	simba_handle client = open_client(url);
	simba_handle term;
	check(simba_lock_acquire(client, "nightly-job", 5000, 0, &term), "acquire");
	uint64_t token;
	check(simba_term_token(term, &token), "token");
	for (int step = 0; step < 3; step++) {
		/* Enough time left for one more step? */
		check(simba_term_ensure_valid(term, 500), "ensure_valid");
		printf("job step %d under token %llu\n", step, (unsigned long long)token);
	}

	/* A second acquisition on another client cannot get the lock now. */
	simba_handle other = open_client(url);
	simba_handle none;
	simba_status st = simba_lock_try_acquire(other, "nightly-job", 5000, 0, &none);
	if (st != SIMBA_ERR_LOCK_HELD) {
		fprintf(stderr, "try_acquire of a held lock: %s, want SIMBA_ERR_LOCK_HELD\n", simba_status_name(st));
		return 1;
	}
	printf("held elsewhere: %s\n", simba_status_name(st));

	check(simba_lock_release(term, 5000), "release");
	check(simba_lock_release(term, 5000), "release again"); /* idempotent */
	int valid;
	check(simba_term_valid(term, &valid), "valid");
	check(simba_term_free(term), "free");
	if (valid) {
		fprintf(stderr, "a released term is still valid\n");
		return 1;
	}

	/* Released: the other client gets the next term, with a higher token. */
	check(simba_lock_acquire(other, "nightly-job", 5000, 0, &term), "acquire after release");
	uint64_t next;
	check(simba_term_token(term, &next), "token");
	printf("next holder got token %llu\n", (unsigned long long)next);
	if (next <= token) {
		fprintf(stderr, "token %llu is not above %llu\n", (unsigned long long)next, (unsigned long long)token);
		return 1;
	}
	check(simba_term_free(term), "free");
	check(simba_client_close(other, 5000), "close");
	check(simba_client_close(client, 5000), "close");
	no_leaks();
	return 0;
}

/* The state the election's callbacks share with the main thread. */
struct leader {
	pthread_mutex_t mu;
	pthread_cond_t changed;
	int elected, revoked, released;
	uint64_t token;
	simba_reason reason;
};

/* The release function: no callback can use user_data any more. A program
 * that allocates user_data frees it here, even after a stop that timed out. */
static void on_released(void *user_data) {
	struct leader *l = user_data;
	pthread_mutex_lock(&l->mu);
	l->released++;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->mu);
}

static void on_elected(void *user_data, simba_handle election, simba_handle term, uint64_t token) {
	struct leader *l = user_data;
	int64_t ms = 0;
	simba_term_remaining_ms(term, &ms); /* callbacks may call the library */
	printf("elected: election %llu, token %llu, %lld ms left\n", (unsigned long long)election,
	       (unsigned long long)token, (long long)ms);
	pthread_mutex_lock(&l->mu);
	l->elected++;
	l->token = token;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->mu);
}

static void on_revoked(void *user_data, simba_handle election, simba_handle term, uint64_t token,
                       simba_reason reason) {
	struct leader *l = user_data;
	(void)election;
	(void)term;
	printf("revoked: token %llu, reason %d\n", (unsigned long long)token, (int)reason);
	pthread_mutex_lock(&l->mu);
	l->revoked++;
	l->reason = reason;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->mu);
}

/* revoked_with reports whether n terms were revoked, the last with reason. */
static int revoked_with(struct leader *l, int n, simba_reason reason) {
	pthread_mutex_lock(&l->mu);
	int ok = l->revoked == n && l->reason == reason;
	pthread_mutex_unlock(&l->mu);
	return ok;
}

/* wait_for waits up to 10s until *counter reaches n. */
static void wait_for(struct leader *l, int *counter, int n, const char *what) {
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&l->mu);
	while (*counter < n) {
		if (pthread_cond_timedwait(&l->changed, &l->mu, &until) != 0) {
			fprintf(stderr, "no %s within 10s\n", what);
			exit(1);
		}
	}
	pthread_mutex_unlock(&l->mu);
}

static int run_election(const char *url) {
	struct leader l = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
	simba_handle client = open_client(url);
	simba_listener listener = {.on_elected = on_elected, .on_revoked = on_revoked, .user_data = &l};
	simba_handle election;
	check(simba_election_start_ex(client, "scheduler", &listener, on_released, &election), "start");
	wait_for(&l, &l.elected, 1, "election");
	pthread_mutex_lock(&l.mu);
	uint64_t first = l.token;
	pthread_mutex_unlock(&l.mu);

	/* Step down: the term ends (STEPPED_DOWN) before the call returns, and
	 * the election contends again after the cooldown. */
	check(simba_election_step_down(election, 200, 5000), "step down");
	if (!revoked_with(&l, 1, SIMBA_STEPPED_DOWN)) {
		fprintf(stderr, "step down returned before its on_revoked(SIMBA_STEPPED_DOWN)\n");
		return 1;
	}
	wait_for(&l, &l.elected, 2, "second election");
	pthread_mutex_lock(&l.mu);
	uint64_t second = l.token;
	pthread_mutex_unlock(&l.mu);
	if (second <= first) {
		fprintf(stderr, "second term's token %llu is not above %llu\n", (unsigned long long)second,
		        (unsigned long long)first);
		return 1;
	}

	char *json;
	check(simba_client_snapshot(client, &json), "snapshot");
	printf("snapshot: %s\n", json);
	simba_string_free(json);

	check(simba_election_stop(election, 5000), "stop");
	if (!revoked_with(&l, 2, SIMBA_STOPPED)) {
		fprintf(stderr, "stop returned before its on_revoked(SIMBA_STOPPED)\n");
		return 1;
	}
	wait_for(&l, &l.released, 1, "release of user_data"); /* a stop that returned SIMBA_OK released it already */
	printf("user_data released\n");
	check(simba_client_close(client, 5000), "close");
	no_leaks();
	return 0;
}

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* bench prints the mean time of one acquire+release+free through the C API. */
static int run_bench(const char *url, long n) {
	simba_handle client = open_client(url);
	simba_handle term;
	check(simba_lock_acquire(client, "bench", 5000, 0, &term), "warm up");
	check(simba_term_free(term), "free");
	double start = now_ns();
	for (long i = 0; i < n; i++) {
		check(simba_lock_acquire(client, "bench", 5000, 0, &term), "acquire");
		check(simba_lock_release(term, 5000), "release");
		check(simba_term_free(term), "free");
	}
	double per = (now_ns() - start) / (double)n;
	printf("cabi acquire+release: %.0f ns/op over %ld ops\n", per, n);
	check(simba_client_close(client, 5000), "close");
	no_leaks();
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: %s URL lock|election|bench [N]\n", argv[0]);
		return 2;
	}
	printf("libsimba %s (ABI %d)\n", simba_version(), (int)simba_abi_version());
	if (simba_abi_version() != SIMBA_ABI_VERSION) {
		fprintf(stderr, "the library's ABI %d is not the header's %d\n", (int)simba_abi_version(), SIMBA_ABI_VERSION);
		return 1;
	}
	if (strcmp(argv[2], "lock") == 0) {
		return run_lock(argv[1]);
	}
	if (strcmp(argv[2], "election") == 0) {
		return run_election(argv[1]);
	}
	if (strcmp(argv[2], "bench") == 0) {
		return run_bench(argv[1], argc > 3 ? atol(argv[3]) : 100000);
	}
	fprintf(stderr, "unknown mode %s\n", argv[2]);
	return 2;
}
