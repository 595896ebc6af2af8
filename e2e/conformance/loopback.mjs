// Preloaded (node --import ./loopback.mjs) before everything-server.ts, which is vendored
// unchanged and calls app.listen(PORT): a listen given a port and no host binds every
// interface, and this makes it bind 127.0.0.1 instead, so that the test's reference server is
// reachable on loopback only.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]));
  if (port && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
