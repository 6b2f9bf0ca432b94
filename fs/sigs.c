/* sigs — SIGHUP reopens the log; stop signals during the drain (sigs.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sigs.h"

static char sigs_log_path[PATH_MAX + 16]; /* "" when the log is stderr or syslog */
static bool sigs_syslog;
static volatile sig_atomic_t sigs_drain_count;
static int sigs_drain_fd = STDERR_FILENO;

void sigs_block_hup(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *sigs_hup_thread(void *arg)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	pthread_setname_np(pthread_self(), "ckptfs-sighup");
	for (;;) {
		int sig = 0;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (!sigs_log_path[0]) {
			log_info("SIGHUP: the log goes to %s, nothing to reopen",
				 sigs_syslog ? "syslog" : "stderr");
			continue;
		}
		int rc = log_reopen(sigs_log_path);
		if (rc != 0)
			log_error("SIGHUP: log %s: cannot reopen: %s; logging on to the old file",
				  sigs_log_path,
				  rc == -ELOOP ? "it is a symbolic link now (never followed)" : strerror(-rc));
		else
			log_info("SIGHUP: log %s reopened", sigs_log_path);
	}
	return NULL;
}

int sigs_hup_start(const char *log_path, bool syslog)
{
	snprintf(sigs_log_path, sizeof(sigs_log_path), "%s", log_path);
	sigs_syslog = syslog;
	pthread_t t;
	int rc = pthread_create(&t, NULL, sigs_hup_thread, NULL);
	if (rc != 0) {
		log_warn("cannot start the SIGHUP thread (%s): SIGHUP will not reopen the log",
			 strerror(rc));
		return -rc;
	}
	pthread_detach(t); /* it waits for SIGHUP until the process exits */
	return 0;
}

static void sigs_drain_signal(int sig)
{
	static const char msg[] =
		"ckptfs: stop signal while uploads to BACKING drain: draining goes on (see "
		"ckptfs-admin umount for progress); a second signal exits now and leaves the rest "
		"queued for the next mount\n";
	if (sigs_drain_count++ == 0) {
		if (write(sigs_drain_fd, msg, sizeof(msg) - 1) < 0) {
			/* nowhere to say it: the drain goes on regardless */
		}
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void sigs_drain_begin(void)
{
	sigs_drain_fd = log_fileno();
	struct sigaction sa = { .sa_handler = sigs_drain_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}
