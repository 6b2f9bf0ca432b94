/* control_shared — the control verbs of a node of a shared catalog
 * (control_shared.c): each answers one request on fd, its last line "ok"
 * or "error" (control.h invariant 2), from cat, the daemon's catalog.
 * gen, list, show and check answer ENOSYS on a catalog that is not shared. */
#ifndef CKPTFS_CONTROL_SHARED_H
#define CKPTFS_CONTROL_SHARED_H

struct cat;

/* gen id:N | gen PATH */
void control_shared_gen(struct cat *cat, int fd, char **argv, int argc);
/* list live|all [SERIES] */
void control_shared_list(struct cat *cat, int fd, char **argv, int argc);
/* show GEN_ID */
void control_shared_show(struct cat *cat, int fd, char **argv, int argc);
/* check */
void control_shared_check(struct cat *cat, int fd);
/* The catalog's counts stats sends on a node of a shared catalog, and
 * "data shared 1"; not the final line (control.c's stats sends it). */
void control_shared_stats(struct cat *cat, int fd);

#endif
