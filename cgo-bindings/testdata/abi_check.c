/*
 * Checks of the C ABI that need a process of their own: a crash, a hang or
 * a leak fails the mode (exit status other than 0) instead of the test
 * runner. bindings_test.go compiles it against the built library and runs
 *
 *   abi_check threads N             the last error of a thread is freed when it exits
 *   abi_check stop-timeout URL      a timed-out stop: release(user_data) after the last callback
 *   abi_check stop-in-callback URL  a stop from a callback: nothing after it but its term's on_revoked
 *   abi_check timeouts URL          a timeout of 0 makes one attempt, INT64_MAX waits the maximum
 *   abi_check credentials URL...    no password of a URL in any message of the library
 *   abi_check fork URL              a forked child sees no valid term, and fails every call
 *   abi_check names                 the status names of the library
 *   abi_check reasons               the revoke reason names of the library
 *   abi_check engine URL            holders, events, leader work and groups, and their bad inputs
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <simba.h>

static void check(simba_status st, const char *what) {
	if (st == SIMBA_OK) {
		return;
	}
	char msg[1024];
	simba_last_error(msg, sizeof msg, NULL);
	fprintf(stderr, "%s: %s: %s\n", what, simba_status_name(st), msg);
	exit(1);
}

static void sleep_ms(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static double now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static simba_handle open_client(const char *url) {
	simba_options opts = {0};
	opts.size = sizeof opts;
	opts.lease_ms = 3000;
	simba_handle client;
	check(simba_client_open(url, &opts, &client), "open");
	return client;
}

static void no_leaks(void) {
	simba_stats s;
	check(simba_stats_get(&s), "stats");
	int64_t streams = -1;
	check(simba_stats_events(&streams), "stats events");
	if (s.clients + s.terms + s.elections + s.cancels + streams != 0) {
		fprintf(stderr, "leaked handles: %lld clients, %lld terms, %lld elections, %lld cancels, %lld event streams\n",
		        (long long)s.clients, (long long)s.terms, (long long)s.elections, (long long)s.cancels,
		        (long long)streams);
		exit(1);
	}
	printf("no handle left open\n");
}

/* ------------------------------------------------------------ threads */

static long rss_kb(void) {
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, resident = 0;
	if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) {
		fprintf(stderr, "cannot read /proc/self/statm\n");
		exit(1);
	}
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static char long_url[8192];

/* One failing call with a long message, then the thread exits. */
static void *fail_once(void *arg) {
	(void)arg;
	simba_handle h;
	if (simba_client_open(long_url, NULL, &h) == SIMBA_OK) {
		fprintf(stderr, "opened %s\n", long_url);
		exit(1);
	}
	return NULL;
}

static void run_threads(int n) {
	strcpy(long_url, "nosuchscheme://");
	memset(long_url + strlen(long_url), 'x', 200);
	size_t len = 0;
	pthread_t t;
	pthread_create(&t, NULL, fail_once, NULL);
	pthread_join(t, NULL);
	fail_once(NULL);
	simba_last_error(NULL, 0, &len);
	if (len < 100) {
		fprintf(stderr, "the message is %zu bytes, the check needs a long one\n", len);
		exit(1);
	}
	/* Warm up: the Go heap grows to its first collections (about 3 MB), and
	 * the runtime's per-thread state settles. */
	for (int i = 0; i < 100000; i++) {
		fail_once(NULL);
	}
	for (int i = 0; i < 2000; i++) {
		pthread_create(&t, NULL, fail_once, NULL);
		pthread_join(t, NULL);
	}
	long before = rss_kb();
	for (int i = 0; i < n; i += 8) {
		pthread_t ts[8];
		for (int j = 0; j < 8; j++) {
			pthread_create(&ts[j], NULL, fail_once, NULL);
		}
		for (int j = 0; j < 8; j++) {
			pthread_join(ts[j], NULL);
		}
	}
	long after = rss_kb();
	printf("threads=%d message=%zu rss_before_kb=%ld rss_after_kb=%ld growth_kb=%ld\n", n, len, before, after,
	       after - before);
	/* A leak of each thread's message is more than n * len bytes (7 MB for
	 * 40,000 threads): allow 3 MB of noise. */
	if (after - before > 3072) {
		fprintf(stderr, "RSS grew by %ld KB over %d threads\n", after - before, n);
		exit(1);
	}
}

/* ------------------------------------------------------------ stop-timeout */

struct watched {
	atomic_int in_callback; /* a callback runs */
	atomic_int released;    /* release(user_data) ran */
	atomic_int elected, revoked, late;
	long block_ms; /* how long on_elected blocks */
};

static void watched_elected(void *ud, simba_handle el, simba_handle term, uint64_t token) {
	(void)el, (void)term, (void)token;
	struct watched *w = ud;
	if (atomic_load(&w->released)) {
		atomic_fetch_add(&w->late, 1);
	}
	atomic_store(&w->in_callback, 1);
	atomic_fetch_add(&w->elected, 1);
	sleep_ms(w->block_ms);
	atomic_store(&w->in_callback, 0);
}

static void watched_revoked(void *ud, simba_handle el, simba_handle term, uint64_t token, simba_reason reason) {
	(void)el, (void)term, (void)token, (void)reason;
	struct watched *w = ud;
	if (atomic_load(&w->released)) {
		atomic_fetch_add(&w->late, 1);
	}
	atomic_store(&w->in_callback, 1);
	atomic_fetch_add(&w->revoked, 1);
	sleep_ms(50);
	atomic_store(&w->in_callback, 0);
}

static void watched_release(void *ud) {
	struct watched *w = ud;
	if (atomic_load(&w->in_callback)) {
		atomic_fetch_add(&w->late, 1); /* released while a callback runs */
	}
	if (atomic_fetch_add(&w->released, 1) != 0) {
		fprintf(stderr, "release ran twice\n");
		exit(1);
	}
}

/* start_watched starts the election abi-stop-timeout of client with the
 * callbacks of w, and waits for its first on_elected. */
static simba_handle start_watched(simba_handle client, struct watched *w, const char *what) {
	simba_listener l = {watched_elected, watched_revoked, w};
	simba_handle el;
	check(simba_election_start_ex(client, "abi-stop-timeout", &l, watched_release, &el), what);
	while (atomic_load(&w->elected) == 0) {
		sleep_ms(5);
	}
	return el;
}

/* timed_out is 1 when st, of the stop or close what with a timeout of
 * 100 ms that started at t0, is SIMBA_ERR_TIMEOUT within 400 ms; else it
 * says why and is 0. */
static int timed_out(const char *what, simba_status st, double t0) {
	double took = now_ms() - t0;
	if (st != SIMBA_ERR_TIMEOUT) {
		fprintf(stderr, "%s while on_elected blocks: %s, want SIMBA_ERR_TIMEOUT\n", what, simba_status_name(st));
		return 0;
	}
	if (took > 400) {
		fprintf(stderr, "%s(100ms) took %.0f ms\n", what, took);
		return 0;
	}
	return 1;
}

static int run_stop_timeout(const char *url) {
	simba_handle client = open_client(url);
	struct watched *w = calloc(1, sizeof *w);
	w->block_ms = 600;
	simba_handle el = start_watched(client, w, "start");
	double t0 = now_ms();
	if (!timed_out("stop", simba_election_stop(el, 100), t0)) {
		return 1;
	}
	if (atomic_load(&w->released)) {
		fprintf(stderr, "released while on_elected still runs\n");
		return 1;
	}
	for (int i = 0; i < 400 && !atomic_load(&w->released); i++) {
		sleep_ms(10);
	}
	if (!atomic_load(&w->released)) {
		fprintf(stderr, "release never ran\n");
		return 1;
	}
	/* The callbacks had their chance to come late: none may. */
	sleep_ms(300);
	printf("elected=%d revoked=%d late=%d\n", atomic_load(&w->elected), atomic_load(&w->revoked),
	       atomic_load(&w->late));
	if (atomic_load(&w->late) != 0) {
		return 1;
	}
	memset(w, 0xdd, sizeof *w); /* what a caller does once released: nothing may read it now */
	free(w);

	/* A stop without timeout has released user_data before it returns. */
	struct watched *w2 = calloc(1, sizeof *w2);
	el = start_watched(client, w2, "start again");
	check(simba_election_stop(el, 5000), "stop");
	if (!atomic_load(&w2->released) || atomic_load(&w2->revoked) != 1) {
		fprintf(stderr, "after a stop: released=%d revoked=%d\n", atomic_load(&w2->released),
		        atomic_load(&w2->revoked));
		return 1;
	}
	free(w2);

	/* A close that times out releases user_data after the last callback, too. */
	struct watched *w3 = calloc(1, sizeof *w3);
	w3->block_ms = 600;
	start_watched(client, w3, "start a third");
	t0 = now_ms();
	if (!timed_out("close", simba_client_close(client, 100), t0)) {
		return 1;
	}
	for (int i = 0; i < 400 && !atomic_load(&w3->released); i++) {
		sleep_ms(10);
	}
	sleep_ms(300);
	if (!atomic_load(&w3->released) || atomic_load(&w3->late) != 0) {
		fprintf(stderr, "after a timed-out close: released=%d late=%d\n", atomic_load(&w3->released),
		        atomic_load(&w3->late));
		return 1;
	}
	free(w3);
	for (int i = 0; i < 200; i++) {
		simba_stats s;
		check(simba_stats_get(&s), "stats");
		if (s.clients + s.terms + s.elections == 0) {
			break;
		}
		sleep_ms(10);
	}
	no_leaks();
	return 0;
}

/* ------------------------------------------------------------ stop-in-callback */

struct selfstop {
	simba_handle el;
	atomic_int stopped; /* the stop returned */
	atomic_int after;   /* callbacks after it, but the on_revoked of the term it was called for */
	atomic_int closing; /* that on_revoked (SIMBA_STOPPED) */
	uint64_t token;     /* the term of the callback that stopped */
	atomic_int elected, stepped;
	atomic_int released;
	int via_step_down; /* step down in on_elected, stop in that on_revoked */
};

static void selfstop_elected(void *ud, simba_handle el, simba_handle term, uint64_t token) {
	(void)term, (void)token;
	struct selfstop *s = ud;
	if (atomic_load(&s->stopped) || atomic_load(&s->released)) {
		atomic_fetch_add(&s->after, 1);
		return;
	}
	atomic_fetch_add(&s->elected, 1);
	if (s->via_step_down) {
		check(simba_election_step_down(el, 0, 5000), "step down from on_elected");
		return;
	}
	s->token = token;
	check(simba_election_stop(el, 5000), "stop from on_elected");
	atomic_store(&s->stopped, 1);
}

static void selfstop_revoked(void *ud, simba_handle el, simba_handle term, uint64_t token, simba_reason reason) {
	(void)term;
	struct selfstop *s = ud;
	if (atomic_load(&s->stopped)) {
		/* Stopped from on_elected: that term's on_revoked still comes, once. */
		if (!s->via_step_down && token == s->token && reason == SIMBA_STOPPED && !atomic_load(&s->released) &&
		    atomic_fetch_add(&s->closing, 1) == 0) {
			return;
		}
		atomic_fetch_add(&s->after, 1);
		return;
	}
	if (reason == SIMBA_STEPPED_DOWN) {
		atomic_fetch_add(&s->stepped, 1);
		sleep_ms(100); /* meanwhile the election contends again and wins */
		check(simba_election_stop(el, 5000), "stop from on_revoked");
		atomic_store(&s->stopped, 1);
	}
}

static void selfstop_release(void *ud) {
	struct selfstop *s = ud;
	atomic_fetch_add(&s->released, 1);
}

static int run_stop_in_callback(const char *url) {
	int failed = 0;
	for (int variant = 0; variant < 2; variant++) {
		simba_handle client = open_client(url);
		struct selfstop *s = calloc(1, sizeof *s);
		s->via_step_down = variant;
		simba_listener l = {selfstop_elected, selfstop_revoked, s};
		check(simba_election_start_ex(client, variant ? "abi-selfstop-b" : "abi-selfstop-a", &l, selfstop_release,
		                              &s->el),
		      "start");
		for (int i = 0; i < 500 && !atomic_load(&s->stopped); i++) {
			sleep_ms(10);
		}
		if (!atomic_load(&s->stopped)) {
			fprintf(stderr, "variant %d: the callback never stopped the election\n", variant);
			return 1;
		}
		sleep_ms(500);
		printf("variant %d: elected=%d stepped=%d closing on_revoked=%d other callbacks after the stop=%d "
		       "released=%d\n",
		       variant, atomic_load(&s->elected), atomic_load(&s->stepped), atomic_load(&s->closing),
		       atomic_load(&s->after), atomic_load(&s->released));
		if (atomic_load(&s->after) != 0 || atomic_load(&s->released) != 1 ||
		    atomic_load(&s->closing) != (variant == 0)) {
			failed = 1;
		}
		check(simba_client_close(client, 5000), "close");
		free(s);
	}
	no_leaks();
	return failed;
}

/* ------------------------------------------------------------ timeouts */

struct delayed_release {
	simba_handle term;
	long after_ms;
};

/* Releases a term after a delay, from a thread of its own. */
static void *release_later(void *arg) {
	struct delayed_release *dr = arg;
	sleep_ms(dr->after_ms);
	check(simba_lock_release(dr->term, 5000), "release from another thread");
	return NULL;
}

/* expect prints the status st of what and reports whether it is want. */
static int expect(const char *what, simba_status st, simba_status want) {
	printf("%s: %s\n", what, simba_status_name(st));
	return st == want;
}

static int run_timeouts(const char *url) {
	simba_handle a = open_client(url), b = open_client(url);
	simba_handle term, other;
	int failed = 0;
	/* Wait for the session, so that the attempt of timeout 0 is the only variable. */
	check(simba_lock_acquire(a, "abi-timeouts-warm", 10000, 0, &term), "warm up");
	check(simba_term_free(term), "free");
	check(simba_lock_acquire(b, "abi-timeouts-warm", 10000, 0, &term), "warm up b");
	check(simba_term_free(term), "free");

	simba_status st = simba_lock_acquire(a, "abi-timeouts", 0, 0, &term);
	if (!expect("acquire(timeout 0) of a free lock", st, SIMBA_OK)) {
		failed = 1;
	} else {
		double t0 = now_ms();
		st = simba_lock_acquire(b, "abi-timeouts", 0, 0, &other);
		double took = now_ms() - t0;
		printf("acquire(timeout 0) of a held lock: %s in %.0f ms\n", simba_status_name(st), took);
		if (st != SIMBA_ERR_LOCK_TIMEOUT || took > 1500) {
			failed = 1;
		}
		check(simba_term_free(term), "free");
	}
	st = simba_lock_acquire(a, "abi-timeouts", INT64_MAX, 0, &term);
	if (!expect("acquire(timeout INT64_MAX) of a free lock", st, SIMBA_OK)) {
		failed = 1;
	} else {
		/* The maximum is accepted by a release too. */
		check(simba_lock_release(term, INT64_MAX), "release(INT64_MAX)");
		check(simba_term_free(term), "free");
	}
	/* A waiter with the maximum timeout on a held lock waits (it is not
	 * refused, nor is it an attempt), and wins once another thread released. */
	check(simba_lock_acquire(b, "abi-timeouts", 10000, 0, &other), "b holds");
	pthread_t releaser;
	struct delayed_release dr = {other, 300};
	if (pthread_create(&releaser, NULL, release_later, &dr) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		exit(1);
	}
	double start = now_ms();
	st = simba_lock_acquire(a, "abi-timeouts", INT64_MAX, 0, &term);
	double waited = now_ms() - start;
	pthread_join(releaser, NULL);
	printf("acquire(timeout INT64_MAX) of a held lock: %s after %.0f ms (released at 300 ms)\n",
	       simba_status_name(st), waited);
	if (st != SIMBA_OK || waited < 250) {
		failed = 1;
	}
	if (st == SIMBA_OK) {
		check(simba_term_free(term), "free");
	}
	check(simba_term_free(other), "free b's term");
	st = simba_lock_try_acquire(a, "abi-timeouts", INT64_MAX, 0, &term);
	if (!expect("try_acquire(timeout INT64_MAX)", st, SIMBA_OK)) {
		failed = 1;
	} else {
		check(simba_term_free(term), "free");
	}
	st = simba_lock_acquire(a, "abi-timeouts", -2, 0, &term);
	if (!expect("acquire(timeout -2)", st, SIMBA_ERR_INVALID_ARGUMENT)) {
		failed = 1;
	}
	st = simba_client_close(b, INT64_MAX);
	if (!expect("close(INT64_MAX)", st, SIMBA_OK)) {
		failed = 1;
	}
	check(simba_client_close(a, 5000), "close");
	no_leaks();
	return failed;
}

/* ------------------------------------------------------------ credentials */

static int run_credentials(int n, char **urls) {
	for (int i = 0; i < n; i++) {
		simba_options opts = {0};
		opts.size = sizeof opts;
		opts.open_timeout_ms = 1500;
		simba_handle client;
		simba_status st = simba_client_open(urls[i], &opts, &client);
		char *msg = simba_last_error_message();
		printf("%s => %s: %s\n", urls[i], simba_status_name(st), msg ? msg : "");
		simba_string_free(msg);
		if (st == SIMBA_OK) {
			simba_client_close(client, 1000);
		}
	}
	return 0;
}

/* ------------------------------------------------------------ fork */

static int run_fork(const char *url) {
	simba_handle client = open_client(url);
	simba_handle term;
	check(simba_lock_acquire(client, "abi-fork", 10000, 0, &term), "acquire");
	uint64_t token;
	check(simba_term_token(term, &token), "token");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		alarm(10); /* a call that hangs fails the check */
		int bad = 0;
		int valid = -1;
		simba_status st = simba_term_valid(term, &valid);
		char msg[1024];
		simba_last_error(msg, sizeof msg, NULL);
		printf("child: term_valid: %s valid=%d: %s\n", simba_status_name(st), valid, msg);
		if (st == SIMBA_OK || valid == 1 || strstr(msg, "fork") == NULL) {
			bad = 1;
		}
		uint64_t child_token = 0;
		st = simba_term_token(term, &child_token);
		printf("child: term_token: %s\n", simba_status_name(st));
		bad |= st == SIMBA_OK;
		simba_handle t2;
		st = simba_lock_acquire(client, "abi-fork-child", 1000, 0, &t2);
		printf("child: acquire: %s\n", simba_status_name(st));
		bad |= st == SIMBA_OK;
		simba_handle c2;
		st = simba_client_open("memory://abi-fork-child", NULL, &c2);
		printf("child: open: %s\n", simba_status_name(st));
		bad |= st == SIMBA_OK;
		st = simba_client_close(client, 1000);
		printf("child: close: %s\n", simba_status_name(st));
		bad |= st == SIMBA_OK;
		simba_stats stats;
		st = simba_stats_get(&stats);
		printf("child: stats: %s\n", simba_status_name(st));
		bad |= st == SIMBA_OK;
		printf("child: version %s, status name %s\n", simba_version(), simba_status_name(SIMBA_ERR_LOCK_HELD));
		fflush(stdout);
		_exit(bad);
	}
	int status;
	waitpid(pid, &status, 0);
	int valid;
	check(simba_term_valid(term, &valid), "parent: valid");
	printf("parent: child %s %d; the parent's term valid=%d\n", WIFEXITED(status) ? "exited" : "killed by signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), valid);
	check(simba_term_free(term), "free");
	check(simba_client_close(client, 5000), "close");
	no_leaks();
	return !(WIFEXITED(status) && WEXITSTATUS(status) == 0 && valid == 1);
}

/* ------------------------------------------------------------ semaphores */

/* run_semaphores: permits up to n, the mismatch code, the lock term
 * functions on a permit's term, and the refusal of every bad argument. */
static int run_semaphores(const char *url) {
	simba_handle a = open_client(url), b = open_client(url);
	simba_handle p1 = 0, p2 = 0, none = 0;
	int bad = 0;
	check(simba_semaphore_acquire(a, "abi-pool", 2, 10000, 0, &p1), "first permit");
	check(simba_semaphore_try_acquire(b, "abi-pool", 2, 0, 0, &p2), "second permit");
	uint64_t t1 = 0, t2 = 0;
	check(simba_term_token(p1, &t1), "token 1");
	check(simba_term_token(p2, &t2), "token 2");
	if (t2 <= t1) {
		fprintf(stderr, "tokens %llu then %llu\n", (unsigned long long)t1, (unsigned long long)t2);
		bad++;
	}
	bad += !expect("try, all held", simba_semaphore_try_acquire(b, "abi-pool", 2, 0, 0, &none), SIMBA_ERR_LOCK_HELD);
	bad += !expect("acquire, all held", simba_semaphore_acquire(b, "abi-pool", 2, 100, 0, &none), SIMBA_ERR_LOCK_TIMEOUT);
	bad += !expect("mismatch", simba_semaphore_try_acquire(b, "abi-pool", 3, 0, 0, &none), SIMBA_ERR_PERMITS_MISMATCH);
	char long_name[128];
	memset(long_name, 'n', 126);
	long_name[126] = 0;
	bad += !expect("NULL client", simba_semaphore_acquire(0, "abi-pool", 2, 100, 0, &none), SIMBA_ERR_BAD_HANDLE);
	bad += !expect("a term as client", simba_semaphore_acquire(p1, "abi-pool", 2, 100, 0, &none), SIMBA_ERR_BAD_HANDLE);
	bad += !expect("NULL name", simba_semaphore_acquire(a, NULL, 2, 100, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("NULL out", simba_semaphore_try_acquire(a, "abi-pool", 2, 100, 0, NULL), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("bad name", simba_semaphore_acquire(a, "a b", 2, 100, 0, &none), SIMBA_ERR_INVALID_NAME);
	bad += !expect("bad UTF-8", simba_semaphore_acquire(a, "\xff", 2, 100, 0, &none), SIMBA_ERR_INVALID_NAME);
	bad += !expect("0 permits", simba_semaphore_acquire(a, "abi-other", 0, 100, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("-1 permits", simba_semaphore_try_acquire(a, "abi-other", -1, 100, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("INT32_MIN permits", simba_semaphore_acquire(a, "abi-other", INT32_MIN, 100, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("too many permits", simba_semaphore_acquire(a, "abi-other", SIMBA_MAX_PERMITS + 1, 100, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	bad += !expect("last slot too long", simba_semaphore_acquire(a, long_name, 100, 100, 0, &none), SIMBA_ERR_INVALID_NAME);
	bad += !expect("negative timeout", simba_semaphore_acquire(a, "abi-other", 2, -5, 0, &none), SIMBA_ERR_INVALID_ARGUMENT);
	if (none != 0) {
		fprintf(stderr, "a failed call stored a handle\n");
		bad++;
	}
	check(simba_lock_release(p1, 5000), "release");
	int valid = 1;
	check(simba_term_valid(p1, &valid), "valid");
	if (valid) {
		fprintf(stderr, "a released permit is valid\n");
		bad++;
	}
	simba_handle p3 = 0;
	check(simba_semaphore_acquire(b, "abi-pool", 2, 10000, 0, &p3), "permit after a release");
	check(simba_term_free(p1), "free 1");
	check(simba_term_free(p2), "free 2");
	check(simba_term_free(p3), "free 3");
	check(simba_client_close(a, 5000), "close a");
	check(simba_client_close(b, 5000), "close b");
	no_leaks();
	return bad ? 1 : 0;
}

/* ------------------------------------------------------------ names */

static int run_names(void) {
	for (int s = 0; s <= 40; s++) {
		const char *name = simba_status_name(s);
		if (strcmp(name, "SIMBA_STATUS_UNKNOWN") == 0) {
			break;
		}
		printf("%d %s\n", s, name);
	}
	return 0;
}

/* ------------------------------------------------------------ reasons */

static int run_reasons(void) {
	for (int r = -1; r <= 7; r++) {
		printf("%d %s\n", r, simba_reason_name(r));
	}
	return 0;
}

/* ------------------------------------------------------------ engine */

static int failures;

/* want checks the status of a call, and prints it. */
static void want(simba_status got, simba_status wanted, const char *what) {
	char msg[512];
	simba_last_error(msg, sizeof msg, NULL);
	printf("%s: %s%s%s\n", what, simba_status_name(got), got != SIMBA_OK ? ": " : "", got != SIMBA_OK ? msg : "");
	if (got != wanted) {
		fprintf(stderr, "%s: %s, want %s\n", what, simba_status_name(got), simba_status_name(wanted));
		failures++;
	}
}

struct work_seen {
	atomic_int calls, valid;
	atomic_int partitions; /* a bit per partition that ran */
	simba_status ret;
};

static simba_status leader_work(void *ud, simba_handle term, uint64_t token) {
	struct work_seen *w = ud;
	int valid = 0;
	if (simba_term_valid(term, &valid) == SIMBA_OK && valid && token > 0) {
		atomic_fetch_add(&w->valid, 1);
	}
	atomic_fetch_add(&w->calls, 1);
	return w->ret;
}

static simba_status partition_work(void *ud, int32_t partition, simba_handle term, uint64_t token) {
	(void)token;
	struct work_seen *w = ud;
	atomic_fetch_or(&w->partitions, 1 << partition);
	atomic_fetch_add(&w->calls, 1);
	return simba_term_wait_end(term, SIMBA_NO_TIMEOUT); /* until the group stops */
}

/* next_of waits up to 10 s for an event of kind, skipping others. */
static int next_of(simba_handle events, simba_event_kind kind, simba_event *ev) {
	for (int i = 0; i < 100; i++) {
		simba_event_clear(ev);
		ev->size = sizeof *ev;
		simba_status st = simba_events_next(events, 100, ev);
		if (st == SIMBA_OK && ev->kind == kind) {
			return 1;
		}
		if (st != SIMBA_OK && st != SIMBA_ERR_TIMEOUT) {
			want(st, SIMBA_OK, "events_next");
			return 0;
		}
	}
	fprintf(stderr, "no event of kind %d within 10s\n", kind);
	failures++;
	return 0;
}

static int run_engine(const char *url) {
	simba_options opts = {0};
	opts.size = sizeof opts;
	opts.lease_ms = 3000;
	opts.identity = "abi-node-a";
	simba_handle a, b;
	check(simba_client_open(url, &opts, &a), "open a");
	b = open_client(url);
	char name[64];
	snprintf(name, sizeof name, "abi-engine-%d", (int)getpid());

	/* Bad inputs: NULL, bad handles, bad sizes. */
	int held = 7;
	simba_holder h = {0};
	h.size = sizeof h;
	simba_event ev = {0};
	ev.size = sizeof ev;
	simba_handle events = 0;
	uint64_t n = 0;
	int64_t cnt = 0;
	want(simba_stats_events(NULL), SIMBA_ERR_INVALID_ARGUMENT, "stats_events(NULL)");
	want(simba_lease_holder(a, NULL, 1000, 0, &held, &h), SIMBA_ERR_INVALID_ARGUMENT, "holder(name NULL)");
	want(simba_lease_holder(a, name, 1000, 0, NULL, &h), SIMBA_ERR_INVALID_ARGUMENT, "holder(out_held NULL)");
	want(simba_lease_holder(a, name, 1000, 0, &held, NULL), SIMBA_ERR_INVALID_ARGUMENT, "holder(out NULL)");
	want(simba_lease_holder(0, name, 1000, 0, &held, &h), SIMBA_ERR_BAD_HANDLE, "holder(client 0)");
	want(simba_lease_holder(a, "a/b", 1000, 0, &held, &h), SIMBA_ERR_INVALID_NAME, "holder(bad name)");
	want(simba_lease_holder(a, name, -2, 0, &held, &h), SIMBA_ERR_INVALID_ARGUMENT, "holder(timeout -2)");
	simba_holder small = {0};
	small.size = 4;
	want(simba_lease_holder(a, name, 1000, 0, &held, &small), SIMBA_ERR_INVALID_ARGUMENT, "holder(size 4)");
	want(simba_term_wait_end(a, 0), SIMBA_ERR_BAD_HANDLE, "term_wait_end(a client)");
	want(simba_events_subscribe(a, 0, NULL), SIMBA_ERR_INVALID_ARGUMENT, "events_subscribe(out NULL)");
	want(simba_events_subscribe(a, -1, &events), SIMBA_ERR_INVALID_ARGUMENT, "events_subscribe(capacity -1)");
	want(simba_events_subscribe(12345678, 0, &events), SIMBA_ERR_BAD_HANDLE, "events_subscribe(unknown client)");
	want(simba_events_next(a, 0, &ev), SIMBA_ERR_BAD_HANDLE, "events_next(a client)");
	want(simba_events_next(1, 0, NULL), SIMBA_ERR_INVALID_ARGUMENT, "events_next(out NULL)");
	want(simba_events_dropped(a, &n), SIMBA_ERR_BAD_HANDLE, "events_dropped(a client)");
	want(simba_events_dropped(a, NULL), SIMBA_ERR_INVALID_ARGUMENT, "events_dropped(NULL)");
	want(simba_events_free(0), SIMBA_ERR_BAD_HANDLE, "events_free(0)");
	want(simba_run_while_leader(a, name, NULL, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT, "run_while_leader(work NULL)");
	want(simba_run_while_leader(a, NULL, leader_work, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT,
	     "run_while_leader(name NULL)");
	want(simba_run_while_leader(0, name, leader_work, NULL, 0, 0), SIMBA_ERR_BAD_HANDLE, "run_while_leader(client 0)");
	want(simba_run_while_leader(a, "", leader_work, NULL, 0, 0), SIMBA_ERR_INVALID_NAME, "run_while_leader(name \"\")");
	want(simba_group_run(a, name, 0, partition_work, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT, "group_run(0 partitions)");
	want(simba_group_run(a, name, 4097, partition_work, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT,
	     "group_run(4097 partitions)");
	want(simba_group_run(a, name, 2, NULL, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT, "group_run(work NULL)");
	want(simba_group_run(a, NULL, 2, partition_work, NULL, 0, 0), SIMBA_ERR_INVALID_ARGUMENT, "group_run(name NULL)");
	want(simba_group_run(a, name, 2, partition_work, NULL, -2, 0), SIMBA_ERR_INVALID_ARGUMENT, "group_run(timeout -2)");
	simba_holder_clear(NULL);
	simba_event_clear(NULL);

	/* Holders: b sees a's identity and token; nobody once released. */
	check(simba_events_subscribe(b, 64, &events), "subscribe b");
	simba_handle term;
	uint64_t token;
	check(simba_lock_acquire(a, name, 10000, 0, &term), "acquire");
	check(simba_term_token(term, &token), "token");
	want(simba_lease_holder(b, name, SIMBA_NO_TIMEOUT, 0, &held, &h), SIMBA_OK, "holder of a held lease");
	printf("holder: held=%d identity=%s token=%llu (a's %llu) session set=%d since set=%d\n", held,
	       h.identity ? h.identity : "(null)", (unsigned long long)h.token, (unsigned long long)token,
	       h.session != NULL, h.since_unix_ns != 0);
	if (held != 1 || h.token != token || h.identity == NULL || strcmp(h.identity, "abi-node-a") != 0 ||
	    h.session == NULL) {
		failures++;
	}
	simba_holder_clear(&h);
	simba_holder_clear(&h); /* twice is harmless */
	check(simba_term_free(term), "free");
	want(simba_lease_holder(b, name, 5000, 0, &held, &h), SIMBA_OK, "holder of a released lease");
	if (held != 0 || h.session != NULL || h.token != 0) {
		fprintf(stderr, "a released lease: held=%d\n", held);
		failures++;
	}

	/* Events: b's stream sees b's own terms. */
	check(simba_lock_acquire(b, name, 10000, 0, &term), "b acquires");
	check(simba_term_free(term), "b frees");
	if (next_of(events, SIMBA_EVENT_ELECTED, &ev)) {
		printf("event: ELECTED name=%s token=%llu lock=%d session set=%d\n", ev.name ? ev.name : "(null)",
		       (unsigned long long)ev.token, ev.lock, ev.session != NULL);
		if (ev.name == NULL || strcmp(ev.name, name) != 0 || !ev.lock || ev.time_unix_ns == 0) {
			failures++;
		}
	}
	if (next_of(events, SIMBA_EVENT_REVOKED, &ev)) {
		printf("event: REVOKED name=%s reason=%s\n", ev.name ? ev.name : "(null)", simba_reason_name(ev.reason));
		if (ev.reason != SIMBA_STOPPED) {
			failures++;
		}
	}
	simba_event small_ev = {0};
	small_ev.size = 8;
	want(simba_events_next(events, 0, &small_ev), SIMBA_ERR_INVALID_ARGUMENT, "events_next(size 8)");
	want(simba_events_dropped(events, &n), SIMBA_OK, "events_dropped");
	check(simba_stats_events(&cnt), "stats events");
	printf("dropped=%llu live streams=%lld\n", (unsigned long long)n, (long long)cnt);

	/* Leader work: its status comes back; a timed run returns SIMBA_OK. */
	struct work_seen w = {0};
	w.ret = SIMBA_ERR_TERM_EXPIRED;
	want(simba_run_while_leader(a, name, leader_work, &w, SIMBA_NO_TIMEOUT, 0), SIMBA_ERR_TERM_EXPIRED,
	     "run_while_leader(work fails)");
	w.ret = SIMBA_OK;
	want(simba_run_while_leader(a, name, leader_work, &w, SIMBA_NO_TIMEOUT, 0), SIMBA_OK,
	     "run_while_leader(work done)");
	printf("leader work: calls=%d on a valid term=%d\n", atomic_load(&w.calls), atomic_load(&w.valid));
	if (atomic_load(&w.calls) != 2 || atomic_load(&w.valid) != 2) {
		failures++;
	}

	/* A group of three partitions on one node: each runs, until the timeout. */
	struct work_seen g = {0};
	char group[64];
	snprintf(group, sizeof group, "abi-group-%d", (int)getpid());
	double t0 = now_ms();
	want(simba_group_run(a, group, 3, partition_work, &g, 1500, 0), SIMBA_OK, "group_run(1500 ms)");
	printf("group: partitions run=%#x calls=%d in %.0f ms\n", atomic_load(&g.partitions), atomic_load(&g.calls),
	       now_ms() - t0);
	if (atomic_load(&g.partitions) != 7) {
		failures++;
	}

	check(simba_client_close(a, 5000), "close a");
	check(simba_client_close(b, 5000), "close b");
	/* The stream outlives its client: the last events, then SIMBA_ERR_CLOSED. */
	int closed_seen = 0;
	simba_status st;
	for (;;) {
		simba_event_clear(&ev);
		ev.size = sizeof ev;
		st = simba_events_next(events, 5000, &ev);
		if (st != SIMBA_OK) {
			break;
		}
		closed_seen |= ev.kind == SIMBA_EVENT_SESSION_CLOSED;
	}
	simba_event_clear(&ev);
	want(st, SIMBA_ERR_CLOSED, "events_next after the close");
	if (!closed_seen) {
		fprintf(stderr, "no SESSION_CLOSED event\n");
		failures++;
	}
	want(simba_events_free(events), SIMBA_OK, "events_free");
	want(simba_events_free(events), SIMBA_ERR_BAD_HANDLE, "events_free again");
	no_leaks();
	return failures != 0;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: abi_check MODE [ARGS]\n");
		return 2;
	}
	const char *mode = argv[1];
	if (strcmp(mode, "threads") == 0 && argc == 3) {
		run_threads(atoi(argv[2]));
		return 0;
	}
	if (strcmp(mode, "stop-timeout") == 0 && argc == 3) {
		return run_stop_timeout(argv[2]);
	}
	if (strcmp(mode, "stop-in-callback") == 0 && argc == 3) {
		return run_stop_in_callback(argv[2]);
	}
	if (strcmp(mode, "timeouts") == 0 && argc == 3) {
		return run_timeouts(argv[2]);
	}
	if (strcmp(mode, "credentials") == 0) {
		return run_credentials(argc - 2, argv + 2);
	}
	if (strcmp(mode, "fork") == 0 && argc == 3) {
		return run_fork(argv[2]);
	}
	if (strcmp(mode, "semaphores") == 0 && argc == 3) {
		return run_semaphores(argv[2]);
	}
	if (strcmp(mode, "names") == 0) {
		return run_names();
	}
	if (strcmp(mode, "reasons") == 0) {
		return run_reasons();
	}
	if (strcmp(mode, "engine") == 0 && argc == 3) {
		return run_engine(argv[2]);
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
