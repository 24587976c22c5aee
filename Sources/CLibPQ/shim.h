#ifndef ADTALLY_CLIBPQ_SHIM_H
#define ADTALLY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
