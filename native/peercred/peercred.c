/*
 * peercred: the kernel's word on who is at the other end of a connected Unix socket.
 *
 * Node 20 exposes no SO_PEERCRED, and the daemon must not trust anything the peer says about
 * itself (an HTTP header is the peer's claim). getsockopt(SO_PEERCRED) returns the uid, gid and
 * pid the peer had when it called connect(2); SO_PEERGROUPS (Linux 4.13+) its supplementary
 * groups at that moment. Both are filled in by the kernel, so the peer cannot forge them.
 *
 * Only node_api.h (N-API): the binary is independent of the Node ABI version.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <node_api.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char message[160];
  const char *code = err == EBADF ? "EBADF" : err == ENOTSOCK ? "ENOTSOCK" : err == ENOPROTOOPT ? "ENOPROTOOPT" : "EPEERCRED";
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_throw_error(env, code, message);
  return NULL;
}

static int set_u32(napi_env env, napi_value obj, const char *name, uint32_t v) {
  napi_value value;
  if (napi_create_uint32(env, v, &value) != napi_ok) return -1;
  return napi_set_named_property(env, obj, name, value) == napi_ok ? 0 : -1;
}

/* peerCred(fd) → { uid, gid, pid, groups: number[] | null } (groups null when the kernel lacks SO_PEERGROUPS). */
static napi_value peer_cred(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, "peerCred(fd): fd must be a non-negative integer");
    return NULL;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  memset(&cred, 0, sizeof cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);
  if (len != sizeof cred) {
    napi_throw_error(env, "EPEERCRED", "getsockopt(SO_PEERCRED) returned a short answer");
    return NULL;
  }

  napi_value result, groups;
  if (napi_create_object(env, &result) != napi_ok) return NULL;
  if (set_u32(env, result, "uid", cred.uid) || set_u32(env, result, "gid", cred.gid) || set_u32(env, result, "pid", (uint32_t)cred.pid)) return NULL;

  /* The groups list: grown until it fits (the kernel says how much it needs with ERANGE). */
  socklen_t size = 64 * sizeof(gid_t);
  gid_t *list = NULL;
  int err = 0;
  for (int tries = 0; tries < 4; tries++) {
    gid_t *grown = realloc(list, size > 0 ? size : sizeof(gid_t));
    if (grown == NULL) { err = ENOMEM; break; }
    list = grown;
    socklen_t got = size;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, list, &got) == 0) { size = got; err = 0; break; }
    err = errno;
    if (err != ERANGE || got <= size) break;
    size = got;
  }
  if (err == ENOPROTOOPT) {
    napi_get_null(env, &groups);
  } else if (err != 0) {
    free(list);
    return throw_errno(env, "getsockopt(SO_PEERGROUPS)", err);
  } else {
    uint32_t n = (uint32_t)(size / sizeof(gid_t));
    if (napi_create_array_with_length(env, n, &groups) != napi_ok) { free(list); return NULL; }
    for (uint32_t i = 0; i < n; i++) {
      napi_value g;
      if (napi_create_uint32(env, list[i], &g) != napi_ok || napi_set_element(env, groups, i, g) != napi_ok) { free(list); return NULL; }
    }
  }
  free(list);
  if (napi_set_named_property(env, result, "groups", groups) != napi_ok) return NULL;
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "peerCred", NAPI_AUTO_LENGTH, peer_cred, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "peerCred", fn) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
