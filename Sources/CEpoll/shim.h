#ifndef ADTALLY_CEPOLL_SHIM_H
#define ADTALLY_CEPOLL_SHIM_H
// epoll(7), which Glibc's Swift module map leaves out: HTTPServer's IO loops register their
// connections in an epoll set of their own, watched by one Dispatch read source per loop.
#include <sys/epoll.h>
#endif
