#ifndef PARLEY_CLIBUV_SHIM_H
#define PARLEY_CLIBUV_SHIM_H
#include <uv.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <time.h>

/// accept4 is behind _GNU_SOURCE; declare it and wrap the flags we always use.
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
static inline int parley_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

/// errno is a macro on glibc; Swift cannot read it directly everywhere.
static inline int parley_errno(void) { return errno; }
#endif
