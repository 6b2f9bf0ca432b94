/* admin_ctl — the client side of the daemon's control channel (protocol in
 * fs/lib/control_proto.h): connect, send one request line, read progress and data
 * lines until the final "ok" or "error ERRNO MESSAGE".
 *
 * Invariants:
 *   1. Nothing is asked of, and nothing is taken from, a server that runs as
 *      neither root nor the cache's owner (the daemon's user; admin.c lets only
 *      those two use the tool): SO_PEERCRED is checked before the request is
 *      sent, and such a server ends the run (one line naming the socket and
 *      the uid, exit 5). Whoever can put a socket at CACHE/control.sock must
 *      not be able to answer for the daemon.
 *   2. A server that passes 1 may still be the cache owner's own program, not
 *      ckptfs: what it says is trusted no further than what that user could
 *      do herself. a->ctl_pid names the process that answered (its
 *      SO_PEERCRED pid), for the commands that act on a process or a mount
 *      (admin_umount.c 1-3). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin.h"
#include "control_proto.h"

#define ADMIN_CTL_TIMEOUT_S 300 /* longest silence between two answer lines */

static int admin_ctl_connect(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	/* a hung daemon must not hang the tool: long jobs send progress lines */
	struct timeval tv = { .tv_sec = ADMIN_CTL_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

int admin_ctl_probe(const char *sock)
{
	int fd = admin_ctl_connect(sock);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* Reads the next line into buf (NUL-terminated, without \n); -errno or
 * -ECONNRESET at EOF before a line. buffered in *pending. */
struct admin_reader {
	int fd;
	char buf[CONTROL_LINE_MAX * 2];
	size_t len;
};

static int admin_ctl_line(struct admin_reader *r, char *line, size_t size)
{
	for (;;) {
		char *nl = memchr(r->buf, '\n', r->len);
		if (nl) {
			size_t n = (size_t)(nl - r->buf);
			snprintf(line, size, "%.*s", (int)n, r->buf);
			memmove(r->buf, nl + 1, r->len - n - 1);
			r->len -= n + 1;
			return 0;
		}
		if (r->len == sizeof(r->buf))
			return -E2BIG;
		ssize_t got = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got == 0 ? -ECONNRESET : -errno;
		r->len += (size_t)got;
	}
}

/* Invariant 1: the server runs as root or as the cache's owner, else the
 * run ends here. Sets a->ctl_pid, a->ctl_uid. */
static void admin_ctl_trust(struct admin *a, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct stat sb;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr)) {
		admin_err("control channel %s: cannot tell who answers on it (SO_PEERCRED: %s): not "
			  "trusted, nothing asked", a->sock, strerror(errno));
		exit(ADMIN_PERM);
	}
	if (stat(a->cache, &sb) != 0) {
		admin_err("control channel %s: cannot tell who owns cache %s (%s): not trusted, nothing "
			  "asked", a->sock, a->cache, strerror(errno));
		exit(ADMIN_PERM);
	}
	if (cr.uid != 0 && cr.uid != sb.st_uid) {
		admin_err("control channel %s: answered by uid %ld (pid %ld), neither root nor the "
			  "cache's owner (uid %ld): not a ckptfs daemon of this cache, not trusted, "
			  "nothing asked", a->sock, (long)cr.uid, (long)cr.pid, (long)sb.st_uid);
		exit(ADMIN_PERM);
	}
	a->ctl_pid = cr.pid;
	a->ctl_uid = cr.uid;
}

int admin_ctl(struct admin *a, const char *request, admin_data_fn fn, void *arg, char *msg,
	      size_t msgsize)
{
	msg[0] = '\0';
	int fd = admin_ctl_connect(a->sock);
	if (fd < 0) {
		snprintf(msg, msgsize, "cannot connect to %s: %s", a->sock, strerror(-fd));
		return fd;
	}
	admin_ctl_trust(a, fd);
	char req[CONTROL_LINE_MAX];
	int n = snprintf(req, sizeof(req), "%s %s\n", CONTROL_MAGIC, request);
	int rc = 0;
	if (n < 0 || (size_t)n >= sizeof(req) || write(fd, req, (size_t)n) != n) {
		rc = -EIO;
		snprintf(msg, msgsize, "cannot send the request to %s", a->sock);
	}
	struct admin_reader *r = rc == 0 ? calloc(1, sizeof(*r)) : NULL;
	if (rc == 0 && !r)
		rc = -ENOMEM;
	char line[CONTROL_LINE_MAX];
	while (rc == 0) {
		r->fd = fd;
		rc = admin_ctl_line(r, line, sizeof(line));
		if (rc != 0) {
			snprintf(msg, msgsize, "the daemon closed the control channel without an answer (%s)",
				 strerror(-rc));
			break;
		}
		if (strcmp(line, "ok") == 0)
			break;
		unsigned long long done, total;
		int err;
		char key[64];
		int off = 0;
		if (sscanf(line, "progress %llu %llu", &done, &total) == 2) {
			admin_progress(a->cmd, done, total);
		} else if (sscanf(line, "data %63s %n", key, &off) == 1 && off > 0) {
			if (fn)
				fn(arg, key, line + off);
		} else if (sscanf(line, "error %d %n", &err, &off) == 1 && off > 0) {
			snprintf(msg, msgsize, "%s", line + off);
			rc = err > 0 ? err : EIO;
			break;
		}
	}
	admin_progress_end();
	free(r);
	close(fd);
	return rc;
}
