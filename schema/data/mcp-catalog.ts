/**
 * The installable-MCP catalog `GET /api/mcp/catalog` serves: a static list
 * shipped with hal0 (seed 001: puppeteer, sqlite, gdrive, slack, …). Each
 * `spec` is what `POST /api/mcp/install {url}` resolves.
 */
export interface CatalogItem {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly category: string;
  readonly spec: string;
  readonly transport: "stdio" | "streamable-http" | "sse";
  /** Environment variables the server needs (names only). */
  readonly env_required: readonly string[];
  readonly source_url: string;
}

export const MCP_CATALOG: readonly CatalogItem[] = [
  { id: "brave-search", name: "Brave Search", description: "Web and local search through the Brave Search API.", category: "search", spec: "npm:@modelcontextprotocol/server-brave-search", transport: "stdio", env_required: ["BRAVE_API_KEY"], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-brave-search" },
  { id: "fetch", name: "Fetch", description: "Fetch a URL and return it as Markdown.", category: "web", spec: "uvx:mcp-server-fetch", transport: "stdio", env_required: [], source_url: "https://pypi.org/project/mcp-server-fetch/" },
  { id: "filesystem", name: "Filesystem", description: "Read and write files under directories you allow.", category: "files", spec: "npm:@modelcontextprotocol/server-filesystem", transport: "stdio", env_required: [], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-filesystem" },
  { id: "gdrive", name: "Google Drive", description: "Search and read files in Google Drive.", category: "files", spec: "npm:@modelcontextprotocol/server-gdrive", transport: "stdio", env_required: ["GDRIVE_CREDENTIALS_PATH"], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-gdrive" },
  { id: "git", name: "Git", description: "Read, search and change a local Git repository.", category: "development", spec: "uvx:mcp-server-git", transport: "stdio", env_required: [], source_url: "https://pypi.org/project/mcp-server-git/" },
  { id: "github", name: "GitHub", description: "Repositories, issues and pull requests through the GitHub API.", category: "development", spec: "npm:@modelcontextprotocol/server-github", transport: "stdio", env_required: ["GITHUB_PERSONAL_ACCESS_TOKEN"], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-github" },
  { id: "memory-graph", name: "Knowledge graph memory", description: "A local knowledge-graph memory (entities, relations, observations).", category: "memory", spec: "npm:@modelcontextprotocol/server-memory", transport: "stdio", env_required: [], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-memory" },
  { id: "postgres", name: "PostgreSQL", description: "Read-only SQL against a PostgreSQL database.", category: "data", spec: "npm:@modelcontextprotocol/server-postgres", transport: "stdio", env_required: ["POSTGRES_URL"], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-postgres" },
  { id: "puppeteer", name: "Puppeteer", description: "Drive a headless browser: navigate, click, screenshot.", category: "web", spec: "npm:@modelcontextprotocol/server-puppeteer", transport: "stdio", env_required: [], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-puppeteer" },
  { id: "slack", name: "Slack", description: "Read channels and post messages in a Slack workspace.", category: "communication", spec: "npm:@modelcontextprotocol/server-slack", transport: "stdio", env_required: ["SLACK_BOT_TOKEN", "SLACK_TEAM_ID"], source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-slack" },
  { id: "sqlite", name: "SQLite", description: "Query and change a local SQLite database.", category: "data", spec: "uvx:mcp-server-sqlite", transport: "stdio", env_required: [], source_url: "https://pypi.org/project/mcp-server-sqlite/" },
  { id: "time", name: "Time", description: "Current time and time-zone conversion.", category: "utilities", spec: "uvx:mcp-server-time", transport: "stdio", env_required: [], source_url: "https://pypi.org/project/mcp-server-time/" },
];
