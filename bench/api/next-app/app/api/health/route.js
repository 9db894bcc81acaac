// GET /api/health as the original UI's route handler: {ok, ts}, never cached.
export const dynamic = "force-dynamic";

export function GET() {
  return Response.json({ ok: true, ts: new Date().toISOString() });
}
