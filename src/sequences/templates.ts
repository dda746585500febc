// Sequence templates: a public template as GET /public-templates shows it.
import { isoNN } from '../platform/ids.js';

type Step = { dayOffset: number; subject: string; body: string };

export function toPublicTemplate(r: {
  id: string;
  name: string;
  use_case: string;
  industry: string | null;
  steps: unknown;
  created_at: Date;
}) {
  return {
    id: r.id,
    name: r.name,
    useCase: r.use_case,
    industry: r.industry,
    steps: (r.steps as Step[]).map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })),
    createdAt: isoNN(r.created_at),
  };
}
