/* metrics — the daemon's Prometheus endpoint (see metrics.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "catalog.h"
#include "cachedir.h"
#include "control.h"
#include "log.h"
#include "metrics.h"
#include "statset.h"

#define METRICS_PATH "/metrics"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct metrics_deps d;
	struct cat *cat; /* read-only, this module's thread only (invariant 1) */
	struct MHD_Daemon *httpd;
};

/* Splits "HOST:PORT" / "[V6]:PORT" into host and port. */
static int metrics_split(const char *spec, char *host, size_t hsize, char *port, size_t psize,
			 const char **why)
{
	const char *colon = strrchr(spec, ':');
	if (!colon || colon == spec || !colon[1]) {
		*why = "expects ADDR:PORT, like 127.0.0.1:9567";
		return -EINVAL;
	}
	const char *h = spec;
	size_t hlen = (size_t)(colon - spec);
	if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	char *end;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (*end || p == 0 || p > 65535) {
		*why = "the port must be 1 to 65535";
		return -EINVAL;
	}
	if (hlen == 0 || hlen >= hsize) {
		*why = "expects ADDR:PORT, like 127.0.0.1:9567";
		return -EINVAL;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	snprintf(port, psize, "%lu", p);
	return 0;
}

static int metrics_resolve(const char *spec, struct sockaddr_storage *sa, const char **why)
{
	char host[256], port[8];
	int rc = metrics_split(spec, host, sizeof(host), port, sizeof(port), why);
	if (rc != 0)
		return rc;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) {
		*why = "the address does not resolve";
		return -EINVAL;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

int metrics_check_addr(const char *spec, const char **why)
{
	struct sockaddr_storage sa;
	return metrics_resolve(spec, &sa, why);
}

/* ---- one scrape ---- */

static void metrics_put(void *arg, const char *key, const char *value)
{
	statset_put(arg, key, value);
}

/* The body, malloc'd; NULL if out of memory. */
static char *metrics_render(struct metrics *m, size_t *len)
{
	struct statset ss;
	memset(&ss, 0, sizeof(ss));
	int rc = m->cat ? statset_from_catalog(&ss, m->cat) : -EBADF;
	if (rc != 0)
		log_warn("metrics: catalog of %s: %s; the scrape has the daemon's counters only",
			 m->d.cache_dir, strerror(-rc));
	if (m->d.ctl)
		control_stats_each(m->d.ctl, metrics_put, &ss);
	statset_finish(&ss);
	char *body = NULL;
	FILE *f = open_memstream(&body, len);
	if (!f)
		return NULL;
	statset_prometheus(&ss, f, m->d.cache_dir, m->d.mountpoint, true);
	if (fclose(f) != 0) {
		free(body);
		return NULL;
	}
	return body;
}

static enum MHD_Result metrics_reply(struct MHD_Connection *conn, unsigned status, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result metrics_request(void *cls, struct MHD_Connection *conn, const char *url,
				       const char *method, const char *version,
				       const char *upload_data, size_t *upload_data_size,
				       void **req_cls)
{
	struct metrics *m = cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return metrics_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	if (strcmp(url, METRICS_PATH) != 0)
		return metrics_reply(conn, MHD_HTTP_NOT_FOUND, "ckptfs serves " METRICS_PATH "\n");
	size_t len = 0;
	char *body = metrics_render(m, &len);
	if (!body)
		return metrics_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_TYPE);
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- start / stop ---- */

int metrics_start(const struct metrics_deps *deps, struct metrics **out)
{
	*out = NULL;
	const char *spec = deps->addr;
	if (!spec[0])
		return 0;
	struct sockaddr_storage sa;
	const char *why = NULL;
	int rc = metrics_resolve(spec, &sa, &why);
	if (rc != 0) {
		log_error("metrics %s: %s; no metrics endpoint", spec, why);
		return rc;
	}
	struct metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->d = *deps;
	char path[PATH_MAX + 16];
	cachedir_path(deps->cache_dir, CACHEDIR_CATALOG, path, sizeof(path));
	rc = cat_open_readonly(path, &m->cat);
	if (rc != 0)
		log_warn("metrics: catalog %s: cannot open read-only: %s; scrapes carry the daemon's "
			 "counters only", path, strerror(-rc));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->httpd = MHD_start_daemon(flags, 0, NULL, NULL, metrics_request, m, MHD_OPTION_SOCK_ADDR,
				    (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
				    (unsigned)10, MHD_OPTION_END);
	if (!m->httpd) {
		int err = errno;
		rc = err ? -err : -EADDRINUSE;
		log_error("metrics %s: cannot listen: %s; no metrics endpoint", spec, strerror(-rc));
		cat_close(m->cat);
		free(m);
		return rc;
	}
	log_info("metrics: http://%s" METRICS_PATH " (Prometheus text format)", spec);
	*out = m;
	return 0;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->httpd); /* joins its thread: no scrape runs after this */
	cat_close(m->cat);
	free(m);
}
