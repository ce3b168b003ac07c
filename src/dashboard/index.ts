// The dashboard's room; `rheo` re-exports it. The page's files are read only
// when a handler is created.
export { createDashboardHandler, DASHBOARD_WRITE_HEADER } from './dashboard-handler.js';
export type { DashboardHandler, DashboardOptions } from './dashboard-handler.js';
export { startDashboard } from './dashboard-server.js';
export type { DashboardServerOptions, RunningDashboard } from './dashboard-server.js';
