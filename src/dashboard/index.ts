// `rheo/dashboard`: its own entry point, so applications that never serve the
// dashboard never load it.
export { createDashboardHandler, DASHBOARD_WRITE_HEADER } from './dashboard-handler.js';
export type { DashboardHandler, DashboardOptions } from './dashboard-handler.js';
export { startDashboard } from './dashboard-server.js';
export type { DashboardServerOptions, RunningDashboard } from './dashboard-server.js';
