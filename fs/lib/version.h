/* version — the release of ckptfs, for the daemon, ckptfs-admin and the
 * Debian package (scripts/build-deb.sh reads it). */
#ifndef CKPTFS_VERSION_H
#define CKPTFS_VERSION_H

#define CKPTFS_VERSION "0.1.0"

#endif
