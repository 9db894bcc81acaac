// Production server defaults; no telemetry, no powered-by header.
module.exports = { poweredByHeader: false };
