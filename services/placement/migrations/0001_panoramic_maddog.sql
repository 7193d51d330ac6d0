ALTER TABLE "placement"."incumbents" ADD COLUMN "challenger" text;--> statement-breakpoint
ALTER TABLE "placement"."incumbents" ADD COLUMN "challenger_since" timestamp with time zone;