// The h3 server: route table, REST handlers, MCP servers, approvals and audit.
// It lands with issue 5 (`hal0 serve`); until then it exports nothing.
export {};
