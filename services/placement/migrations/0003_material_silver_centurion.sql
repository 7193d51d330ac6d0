ALTER TABLE "placement"."signals" ADD COLUMN "recent_cost_samples" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "placement"."signals" ADD COLUMN "recent_cost_micro_usd" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Carry what was measured over: the mean so far, as if it were the recent window (at most its size).
UPDATE "placement"."signals" SET "recent_cost_samples" = LEAST("cost_samples", 50), "recent_cost_micro_usd" = CASE WHEN "cost_samples" = 0 THEN 0 ELSE "total_cost_micro_usd"::double precision * LEAST("cost_samples", 50) / "cost_samples" END;
