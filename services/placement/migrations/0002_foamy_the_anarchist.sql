ALTER TABLE "placement"."signals" ADD COLUMN "recent_verified" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "placement"."signals" ADD COLUMN "recent_work" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Carry what was learned over: the evidence so far, as if it were the recent window (at most its size).
UPDATE "placement"."signals" SET "recent_work" = LEAST("work_samples", 100), "recent_verified" = CASE WHEN "work_samples" = 0 THEN 0 ELSE "verified_successes"::double precision * LEAST("work_samples", 100) / "work_samples" END;
